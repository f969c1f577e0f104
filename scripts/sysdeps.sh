#!/usr/bin/env bash
# Installs the system packages some tests need, when they are missing and we are root
# with apt. Never fails the build: a test that needs a missing tool says so itself.
set -u
# SLURM (slurm-wlm + munge) for the SLURM executor's tests: its own script installs it.
bash "$(dirname "$0")/slurm_local.sh" install
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need+=(postgresql)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "sysdeps: installing ${need[*]}"
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 \
    || echo "sysdeps: could not install ${need[*]}; the tests that need them will be skipped"
else
  echo "sysdeps: missing ${need[*]} (not root or no apt); the tests that need them will be skipped"
fi
exit 0
