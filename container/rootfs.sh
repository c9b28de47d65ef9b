#!/bin/sh
# The image's Python layer where no container runtime or registry can be had: a Debian bookworm root file
# system made from Debian's packages (debootstrap), the workflow copied in as contrastlab.def's %files
# says, then the install of its %post (scripts/install.py under constraints.txt) run inside it (chroot).
# Needs root, debootstrap (apt-get install debootstrap) and Debian's package mirror and the package
# registry. Python is Debian's python3.11 here, python:3.11-slim-bookworm's own build in the images.
#
#   sudo container/rootfs.sh /scratch/contrastlab-rootfs           # torch for CUDA 13.0
#   sudo container/rootfs.sh /scratch/contrastlab-rootfs 12.6      # PyTorch's cu126 build (or cpu)
#
# Then e.g. `sudo chroot /scratch/contrastlab-rootfs /opt/contrastlab/.venv/bin/snakemake --help`.
set -eu
root=${1:?usage: container/rootfs.sh <new folder> [CUDA: 12.6 or cpu; empty: 13.0]}
cuda=${2:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ ! -e "$root" ] || { echo "contrastlab: $root exists; give a new folder" >&2; exit 1; }

debootstrap --variant=minbase --include=python3,python3-venv,git,procps,ca-certificates \
  bookworm "$root" http://deb.debian.org/debian
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's CA bundle, for a proxy that re-signs TLS (pip and uv take it as their cert).
host_ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$host_ca" ] || host_ca="$root/etc/ssl/certs/ca-certificates.crt"
cp "$host_ca" "$root/etc/ssl/certs/host-ca.crt"
mkdir -p "$root/opt/contrastlab"
# The paths of the definition's %files, one source for both.
paths=$(awk '/^%files$/ { on = 1; next } /^%/ { on = 0 } on && NF { print $1 }' "$repo/container/contrastlab.def")
# shellcheck disable=SC2086  # one word per path
tar -c -C "$repo" $paths | tar -x -C "$root/opt/contrastlab"

mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 CUDA="$cuda" \
  PIP_CERT=/etc/ssl/certs/host-ca.crt SSL_CERT_FILE=/etc/ssl/certs/host-ca.crt /bin/sh -euc '
    cd /opt/contrastlab
    python3 -m venv .venv
    .venv/bin/python scripts/install.py ${CUDA:+--cuda "$CUDA"}
    .venv/bin/python -c "import contrastlab, torch, transformers, snakemake; print(\"contrastlab\", contrastlab.__version__, \"torch\", torch.__version__)"
    .venv/bin/python -m pip check
  '
