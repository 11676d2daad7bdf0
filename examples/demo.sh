#!/bin/sh
echo demo placeholder
