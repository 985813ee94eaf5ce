#!/bin/sh
# Verifies the systemd units with systemd-analyze (offline), with ExecStart
# and ExecReload pointing at the binaries of this build. Skips (77) where
# systemd-analyze is missing.
set -eu
src=$1 build=$2
command -v systemd-analyze >/dev/null 2>&1 || { echo "systemd-analyze not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|@BINDIR@/selectinferd|$build/daemon/selectinferd|; s|@BINDIR@/sictl|$build/client/sictl|" \
    "$src/systemd/selectinferd.service.in" > "$tmp/selectinferd.service"
cp "$src/systemd/selectinferd.socket" "$tmp/"
grep -q '@' "$tmp/selectinferd.service" && { echo "unsubstituted @VAR@ left"; exit 1; }
# the checks DAEMON.md asks for, so that a unit edit cannot drop them silently
for want in '^Type=notify$' '^SocketMode=0660$' '^SocketGroup=' '^ProtectSystem=strict$' \
            '^NoNewPrivileges=yes$' '^RestrictAddressFamilies=AF_UNIX$' '^DevicePolicy=closed$' \
            '^RuntimeDirectory=' '^ExecReload=.*sictl.* reload$' '^WatchdogSec='; do
    cat "$tmp"/selectinferd.* | grep -q "$want" || { echo "units lack $want"; exit 1; }
done
if cat "$tmp"/selectinferd.* | grep -q '^PrivateDevices=yes'; then
    echo "PrivateDevices=yes hides the GPU"; exit 1
fi
out=$(cd "$tmp" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no \
      ./selectinferd.socket ./selectinferd.service 2>&1) || true
echo "$out"
# unknown keys, bad values and unparsable lines are errors in our units
bad=$(printf '%s\n' "$out" | grep -i -e 'unknown key' -e 'unknown section' -e 'invalid' \
      -e 'failed to parse' -e 'bad' || true)
if [ -n "$bad" ]; then
    echo "systemd-analyze found problems:"; echo "$bad"; exit 1
fi
echo "units verified"
