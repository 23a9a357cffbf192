#!/bin/sh
# A sentinel of deploy/compose.yaml: writes its configuration (a sentinel
# rewrites the file it runs with, so each gets a copy of its own, under
# /data) with the password from its environment, then runs it. A script
# mounted read-only, not compose's `configs: content`, which Debian 12's
# docker-compose 1.29 rejects. Quorum 2 of 3; hostnames, not addresses, so
# a restarted node is found again. The master name is the one
# SECKILL_REDIS_URL names.
set -eu
: "${REDIS_PASSWORD:?the sentinel needs REDIS_PASSWORD}"
cat > /data/sentinel.conf <<EOF
port 26379
dir /data
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
requirepass ${REDIS_PASSWORD}
sentinel sentinel-pass ${REDIS_PASSWORD}
sentinel monitor seckill redis 6379 2
sentinel auth-pass seckill ${REDIS_PASSWORD}
sentinel down-after-milliseconds seckill 5000
sentinel failover-timeout seckill 30000
sentinel parallel-syncs seckill 1
EOF
exec redis-server /data/sentinel.conf --sentinel
