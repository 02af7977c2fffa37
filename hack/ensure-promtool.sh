#!/usr/bin/env bash
# Makes sure promtool (from Debian's prometheus package) is on PATH: the
# observability tests run `promtool check metrics` against a live scrape.
# Prints promtool's path. Installs with apt-get when running as root.
set -euo pipefail
if p=$(command -v promtool); then echo "$p"; exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "ensure-promtool: installing Debian's prometheus package (ships promtool)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A policy-rc.d that refuses keeps the package from starting a Prometheus server.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  }
  command -v promtool
  exit 0
fi
echo "ensure-promtool: promtool not found; install Debian's 'prometheus' package (or put promtool on PATH)" >&2
exit 1
