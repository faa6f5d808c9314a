# npm-fetch.sh: sourced by the fetch scripts (bash).
#
# npm_fetch PKG VERSION TGZ: download the npm package PKG@VERSION into TGZ
# (a path whose file name is npm pack's: PKG with "@" dropped and "/" as
# "-", then -VERSION.tgz). With npm and no $EDGE_NPM_REGISTRY it runs npm
# pack in TGZ's directory; otherwise it fetches the registry's tarball URL
# ($EDGE_NPM_REGISTRY or registry.npmjs.org) with curl or wget. The caller
# checks the integrity. Fails (through die, which the caller defines) when
# no download tool works.
npm_fetch() {
	local pkg=$1 version=$2 tgz=$3
	local registry="${EDGE_NPM_REGISTRY:-https://registry.npmjs.org}"
	local url="${registry%/}/${pkg}/-/${pkg##*/}-${version}.tgz"
	if command -v npm >/dev/null 2>&1 && [ -z "${EDGE_NPM_REGISTRY:-}" ]; then
		(cd "$(dirname "$tgz")" && npm pack --silent "${pkg}@${version}" >/dev/null) ||
			die "npm pack ${pkg}@${version} failed"
	elif command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$tgz" "$url" || die "download of $url failed"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$tgz" "$url" || die "download of $url failed"
	else
		die "need npm, curl or wget to download $url"
	fi
	[ -s "$tgz" ] || die "no package at $tgz after download"
}
