#!/usr/bin/env bash
# Builds the Dockerfile, unchanged, into buildah's local store (deploy/image/buildah) as $1 (default
# localhost/queuepilot:dev), with no registry: debian:bookworm-slim is made here by debootstrap
# from this machine's own Debian mirror. Needs root, buildah and debootstrap (`make image`
# installs them). The base image and the build's layers stay in the store, so a second build
# redoes only what changed; to refresh the base, remove it (`deploy/image/buildah rmi $BASE`).
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE=${1:-localhost/queuepilot:dev}
# The name `FROM debian:bookworm-slim` resolves to, found in the store without pulling.
BASE=docker.io/library/debian:bookworm-slim
BUILDAH=deploy/image/buildah

# The Debian mirror this machine's apt uses: deb822 sources (bookworm's own format), then the
# one-line format. DEBIAN_MIRROR overrides both.
debian_mirror() {
    local found
    found=$(awk 'BEGIN { RS = "" }
        /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t\n]|$)/ && match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/) {
            uri = substr($0, RSTART, RLENGTH); sub(/^\n?URIs:[ \t]*/, "", uri); print uri; exit
        }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    if [ -z "$found" ]; then
        found=$(sed -E 's/\[[^]]*\]//' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }')
    fi
    [ -n "$found" ] || { echo "no Debian bookworm mirror in /etc/apt: set DEBIAN_MIRROR" >&2; return 1; }
    echo "$found"
}

# What debian:bookworm-slim leaves out of a minbase debootstrap, as debuerreotype's slimify does:
# documentation, manuals and translations, now and in every package installed later; and, as its
# apt configuration does, the downloaded packages and apt's caches after each install.
slim() {
    local root=$1
    cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    rm -rf "$root"/usr/share/{man,groff,info,lintian,linda}/* "$root"/var/lib/apt/lists/* \
        "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    find "$root/var/log" -type f -delete
    # The host's, copied by debootstrap: a container gets its own from the runtime.
    rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
}

make_base() {
    local mirror container
    mirror=${DEBIAN_MIRROR:-$(debian_mirror)}
    rootfs=$(mktemp -d /var/tmp/queuepilot-rootfs.XXXXXX)
    echo "debootstrap: bookworm (minbase) from $mirror"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 ||
        { tail -n 20 "$rootfs.log" >&2; return 1; }
    slim "$rootfs"
    # This machine's own trust (the CA of a TLS-intercepting proxy, say) goes with its mirror, so
    # pip in the build reaches PyPI as this machine does once ca-certificates is installed. An
    # image built here trusts it too; one built on the registry's base (GHCR's) does not.
    if [ -d /usr/local/share/ca-certificates ]; then
        mkdir -p "$rootfs/usr/local/share/ca-certificates"
        cp -a /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/"
    fi
    container=$($BUILDAH from --pull=never scratch)
    cp -a "$rootfs/." "$($BUILDAH mount "$container")/"
    $BUILDAH config --cmd '["bash"]' "$container"
    $BUILDAH commit --quiet --rm "$container" "$BASE" >/dev/null
}

rootfs=""
# --one-file-system: debootstrap unmounts what it mounted inside, but never follow one if not.
trap '[ -z "$rootfs" ] || rm -rf --one-file-system "$rootfs" "$rootfs.log"' EXIT

# Working containers left by an interrupted build or test hold their layers; this store is
# make image's alone, so none of them is in use.
$BUILDAH rm --all >/dev/null
if ! $BUILDAH inspect --type image "$BASE" >/dev/null 2>&1; then
    make_base
fi
# The commit a development build names: the context has no .git (.dockerignore), so the build
# stage records this one in the package.
COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
# The build stage is tagged too: then each image the last build used is an ancestor of a named
# one, and pruning removes only what older builds left (vfs keeps every layer as a full copy). It
# gets the same commit, or the image's build would redo the stage's last layer with another.
$BUILDAH bud --pull=never --layers --isolation chroot --network host --target build \
    --build-arg QUEUEPILOT_COMMIT="$COMMIT" --tag localhost/queuepilot-build:cache .
$BUILDAH bud --pull=never --layers --isolation chroot --network host --tag "$IMAGE" \
    --build-arg QUEUEPILOT_COMMIT="$COMMIT" .
$BUILDAH rmi --prune >/dev/null
$BUILDAH images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$IMAGE"
