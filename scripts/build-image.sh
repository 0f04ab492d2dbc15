#!/usr/bin/env bash
# Builds the karpenter-tui image from the Containerfile at the repository root, with
# podman if it is installed, else docker.
#
#   scripts/build-image.sh            # builds karpenter-tui:<version in Cargo.toml>
#   IMAGE=registry.example.com/karpenter-tui TAG=dev scripts/build-image.sh --push
#
# IMAGE and TAG override the name; --push pushes IMAGE:TAG after the build (log in to
# the registry first). CONTAINER_ENGINE=docker picks an engine when both are installed.
#
# Only bash builtins are used before the engine runs, so the script says what is missing
# even on a machine without coreutils on PATH (tests/image.rs runs it that way).
set -euo pipefail

usage() {
    echo "usage: ${0##*/} [--push]   (env: IMAGE, TAG, CONTAINER_ENGINE)" >&2
}

push=false
for arg in "$@"; do
    case "$arg" in
        --push) push=true ;;
        -h | --help) usage; exit 0 ;;
        *) echo "${0##*/}: unknown argument: $arg" >&2; usage; exit 2 ;;
    esac
done

here="${BASH_SOURCE[0]%/*}"
[[ "$here" == "${BASH_SOURCE[0]}" ]] && here=.
root="$(cd "$here/.." && pwd)"

# The package version: the first `version = "..."` in Cargo.toml's [package] table.
version=""
in_package=false
while IFS= read -r line; do
    case "$line" in
        "[package]") in_package=true ;;
        "["*) in_package=false ;;
    esac
    if $in_package && [[ "$line" =~ ^version[[:space:]]*=[[:space:]]*\"([^\"]+)\" ]]; then
        version="${BASH_REMATCH[1]}"
        break
    fi
done < "$root/Cargo.toml"
if [[ -z "$version" ]]; then
    echo "${0##*/}: no version in $root/Cargo.toml's [package]" >&2
    exit 1
fi

image="${IMAGE:-karpenter-tui}"
tag="${TAG:-$version}"

engine="${CONTAINER_ENGINE:-}"
if [[ -z "$engine" ]]; then
    if command -v podman > /dev/null 2>&1; then
        engine=podman
    elif command -v docker > /dev/null 2>&1; then
        engine=docker
    else
        echo "${0##*/}: neither podman nor docker is installed (or on PATH); install one of them" >&2
        exit 1
    fi
elif ! command -v "$engine" > /dev/null 2>&1; then
    echo "${0##*/}: CONTAINER_ENGINE=$engine is not on PATH" >&2
    exit 1
fi

source_url="$(git -C "$root" remote get-url origin 2> /dev/null || true)"
build_args=(--build-arg "VERSION=$version")
[[ -n "$source_url" ]] && build_args+=(--build-arg "SOURCE=$source_url")

echo "building $image:$tag with $engine" >&2
# BuildKit (docker) reads the Containerfile's `RUN --mount=type=cache`; podman always can.
DOCKER_BUILDKIT=1 "$engine" build \
    --file "$root/Containerfile" \
    --tag "$image:$tag" \
    "${build_args[@]}" \
    "$root"

if $push; then
    echo "pushing $image:$tag" >&2
    "$engine" push "$image:$tag"
fi
