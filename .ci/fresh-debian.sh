#!/usr/bin/env bash
# The README's Quick start on a fresh Debian 12, as its two commands promise: a minimal
# Debian 12 root (debootstrap --variant=minbase, what a debian:12 container holds) gets a
# clone of this checkout's HEAD and runs `bash examples/run-demo.sh` then `bash tests/run.sh`
# in it, as root, with an empty environment. Not part of CI (18 minutes on 2 cores, most of
# it the test suite); run it after changing what the commands install or what the tests call.
# It found that tests used pgrep (procps is not in a minimal Debian) and that grzo-finetune
# started MPI's singleton runtime in every process (10-15 s each where the host name does not
# resolve).
#   usage (as root, on Debian or Ubuntu): bash .ci/fresh-debian.sh WORKDIR
#   WORKDIR/root is the Debian root (kept, so a second run skips debootstrap), WORKDIR/log.txt
#   the commands' output; exits with the test command's status.
set -u
[ $# -eq 1 ] || { echo "usage: $0 WORKDIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: must run as root (debootstrap, chroot, mounts)" >&2; exit 2; }
work=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
root=$work/root repo=$(cd "$(dirname "$0")/.." && pwd)
command -v debootstrap > /dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap > /dev/null || exit 1
if [ ! -x "$root/usr/bin/apt-get" ]; then
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 ||
        { echo "$0: debootstrap failed: $work/debootstrap.log" >&2; exit 1; }
fi
# what any installed machine has: its name in /etc/hosts, name servers, and this machine's
# local certificate authorities (a proxy that inspects TLS needs them for pip)
[ -s "$root/etc/hosts" ] || printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" > "$root/etc/hosts"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# (ca-certificates, installed with python3-pip by the Quick start, adds them as it installs)
if ls /usr/local/share/ca-certificates/*.crt > /dev/null 2>&1; then
    mkdir -p "$root/usr/local/share/ca-certificates" &&
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" || exit 1
fi
for d in proc sys dev; do
    mkdir -p "$root/$d"
    mountpoint -q "$root/$d" || mount --rbind "/$d" "$root/$d" || exit 1
    mount --make-rslave "$root/$d"
done
trap 'for d in dev sys proc; do umount -R "$root/$d" 2> /dev/null; done' EXIT
rm -rf "$root/root/grzo"
git clone -q "$repo" "$root/root/grzo" || exit 1
echo "$0: Quick start in $root/root/grzo at $(git -C "$repo" rev-parse --short HEAD); output in $work/log.txt"
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    /bin/bash -c 'cd /root/grzo && bash examples/run-demo.sh && bash tests/run.sh' > "$work/log.txt" 2>&1
rc=$?
tail -1 "$work/log.txt"
exit $rc
