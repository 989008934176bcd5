#!/bin/bash
set -e
apt-get install -y flower-greeter
flower-greeter > /app/greeting.txt
