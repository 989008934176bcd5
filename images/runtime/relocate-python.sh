#!/bin/sh
# Make the base's Python self-contained under DEST (the flower runtime bundle's interpreter), so
# flower runs in any x86_64 Linux image, whatever that image's own libc, Python, or none:
#   DEST/bin/python3.X     the base's interpreter, its ELF interpreter and rpath pointed inside
#                          DEST/lib (patchelf), so nothing of the image it runs in is loaded;
#   DEST/lib/python3.X/    the standard library, lib-dynload included (no tests, no dist-packages);
#   DEST/lib/*.so*         every shared library the interpreter and its extension modules need,
#                          glibc and its loader included.
# Nothing is set in any environment (no LD_LIBRARY_PATH, no PYTHONHOME): the agent's commands,
# started by the CLI that flower starts, see the image's own libraries and Python.
# Usage: relocate-python.sh DEST              (the interpreter; needs patchelf, ldd, dpkg)
#        relocate-python.sh DEST --libs DIR... (the libraries DIR's extension modules need)
set -eu
dest=${1:?usage: relocate-python.sh DEST [--libs DIR...]}
py=$(readlink -f "$(command -v python3)")
ver=$(basename "$py")

# The shared libraries: all of glibc (a library loaded later must never be the image's
# libpthread next to our libc), and what any extension module needs, found by ldd (the loader
# prints its own line, "/lib64/ld-linux-x86-64.so.2 (0x...)", the rest "name => path"), the
# interpreter's own included.
collect_libs() {
    { dpkg -L libc6 | grep '\.so' | grep -v '/gconv/'
      { ldd "$py"; find "$@" -name '*.so*' -type f -exec ldd {} \;; } 2>/dev/null \
        | awk '/=> \// {print $3} /ld-linux/ && !/=>/ {print $1}'
    } | sort -u | while read -r lib; do
        if [ -f "$lib" ] && [ ! -e "$dest/lib/$(basename "$lib")" ]; then cp -L "$lib" "$dest/lib/"; fi
    done
}

if [ "${2:-}" = --libs ]; then  # after the venv is installed: its extension modules' libraries
    shift 2
    collect_libs "$@"
    exit 0
fi

mkdir -p "$dest/bin" "$dest/lib"
cp -a "/usr/lib/$ver" "$dest/lib/$ver"
rm -rf "$dest/lib/$ver/test" "$dest/lib/$ver/dist-packages" "$dest/lib/$ver/site-packages"
mkdir -p "$dest/lib/$ver/site-packages"
cp "$py" "$dest/bin/$ver"
collect_libs "$dest/lib/$ver/lib-dynload"
test -e "$dest/lib/ld-linux-x86-64.so.2" || { echo "relocate-python.sh: no glibc loader found" >&2; exit 1; }
# DT_RPATH (not RUNPATH): it also serves the libraries the extension modules load.
patchelf --set-interpreter "$dest/lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$dest/lib" "$dest/bin/$ver"
ln -s "$ver" "$dest/bin/python3"
# Proof, in the build: the relocated interpreter runs, finds its own stdlib, and loads the
# extension modules of the standard library.
"$dest/bin/python3" -c "import sys, ssl, sqlite3, ctypes, lzma, bz2, zlib, json, asyncio
assert sys.prefix == '$dest', sys.prefix
assert all(not p.startswith('/usr') for p in sys.path), sys.path"
