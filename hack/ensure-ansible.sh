#!/usr/bin/env bash
# Makes sure ansible-playbook (Debian's ansible package, which ships the
# kubernetes.core collection) and the Python kubernetes client
# (python3-kubernetes, which kubernetes.core imports) are installed for
# /usr/bin/python3, the interpreter Debian's ansible runs on: the ansible
# package's tests and examples/playbook run playbooks against the embedded
# control plane. Idempotent: does nothing when both are present. Prints
# ansible-playbook's path. Installs with apt-get when running as root.
set -euo pipefail
PY=/usr/bin/python3
have() {
  command -v ansible-playbook >/dev/null && [ -x "$PY" ] && "$PY" -c 'import kubernetes' >/dev/null 2>&1
}
if have; then command -v ansible-playbook; exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "ensure-ansible: installing Debian's ansible and python3-kubernetes packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(ansible python3-kubernetes)
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  }
  if ! have; then
    echo "ensure-ansible: installed, but ansible-playbook or '$PY -c \"import kubernetes\"' still fails" >&2
    exit 1
  fi
  command -v ansible-playbook
  exit 0
fi
echo "ensure-ansible: ansible-playbook or the python3 kubernetes module not found; install Debian's 'ansible' and 'python3-kubernetes' packages" >&2
exit 1
