#!/usr/bin/env bash
# make_espeak_bundle.sh DEST: extract Debian's espeak-ng (binary, library, data,
# libsonic) into DEST/root without installing it, and replace libpcaudio.so.0 by
# the no-audio stub (pcaudio_stub.c), so that espeak-ng runs on a host that has
# neither the package nor ALSA/PulseAudio (the GPU host). Use it with
#   LD_LIBRARY_PATH=DEST/root/usr/lib/x86_64-linux-gnu
#   ESPEAK_DATA_PATH=DEST/root/usr/lib/x86_64-linux-gnu/espeak-ng-data
#   DEST/root/usr/bin/espeak-ng
set -euo pipefail
dest=${1:?usage: make_espeak_bundle.sh DEST}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest/debs" "$dest/root"
(cd "$dest/debs" && apt-get download espeak-ng libespeak-ng1 espeak-ng-data libsonic0 libpcaudio0)
for f in "$dest"/debs/*.deb; do dpkg -x "$f" "$dest/root"; done
lib="$dest/root/usr/lib/x86_64-linux-gnu"
rm -f "$lib"/libpcaudio.so*
gcc -shared -fPIC -O2 -Wl,-soname,libpcaudio.so.0 -o "$lib/libpcaudio.so.0" "$here/pcaudio_stub.c"
rm -rf "$dest/root/usr/share/doc" "$dest/root/usr/share/man" "$dest/debs"
# English only: drop the other languages' pronunciation dictionaries (~10 MB).
find "$lib/espeak-ng-data" -maxdepth 1 -name '*_dict' ! -name en_dict -delete
echo "espeak-ng bundle in $dest/root"
