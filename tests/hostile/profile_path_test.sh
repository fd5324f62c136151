#!/usr/bin/env bash
# Hostile input: a STRATA_SHUTDOWN path where the profile cannot be written, on the unmodified
# two-worker program (short runs, exit status 7):
#   missing_dir     the directory does not exist
#   file_as_parent  a regular file where a directory should be
#   directory       the path is an existing directory (with a file in it)
#   device, fifo    the path is a character device / a named pipe (the rename-based writer
#                   must not replace them with a regular file)
#   read_only       a read-only file system (tmpfs remounted ro) holding an older profile
#   full            a full file system (64 kB tmpfs, nearly filled) holding an older profile
# Each must give one clear error on stderr naming the path and the reason, leave no
# half-written or temporary file behind, leave whatever was at the path byte-for-byte intact,
# and keep the program's exit status. The file systems are mounted in a private mount
# namespace (unshare -m; needs root, as everything in this sandbox runs), so nothing outlives
# the test.
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/two_workers_fp)"
short=(--iterations 300000 --exit-code 7)

# check_run NAME PATH REASON: the common checks after a run that could not save to PATH.
check_run() {
  local name="$1" path="$2" reason="$3"
  local message
  message=$(grep -m1 -F 'could not save the profile' "$WORK/$name.err")
  result "scenario=hostile-path case=$name status=$RUN_STATUS message=\"$message\""
  [[ "$RUN_STATUS" -eq 7 ]] && pass "$name: exit status 7 kept" ||
    fail "$name: exit status $RUN_STATUS, the program returns 7"
  grep -q '^two_workers: done exit_code=7$' "$WORK/$name.out" ||
    fail "$name: the program did not run to its end"
  if [[ -z "$message" ]]; then
    fail "$name: no error on stderr"
    sed 's/^/    stderr: /' "$WORK/$name.err" | head -10
  elif ! grep -qF -- "$path" <<<"$message" || ! grep -qiF -- "$reason" <<<"$message"; then
    fail "$name: the error does not name the path $path and '$reason': $message"
  else
    pass "$name: error: $message"
  fi
  if grep -qiE 'terminate called|Segmentation|AddressSanitizer|runtime error' "$WORK/$name.err"; then
    fail "$name: crash or sanitizer report on stderr"
  fi
}

# no_leftovers NAME DIR [EXPECTED...]: DIR holds exactly the EXPECTED names (no temporary file).
no_leftovers() {
  local name="$1" dir="$2"
  shift 2
  local found expected
  found=$(ls -A "$dir" | sort | tr '\n' ' ')
  expected=$(printf '%s\n' "$@" | sed '/^$/d' | sort | tr '\n' ' ')
  [[ "$found" == "$expected" ]] && pass "$name: $dir holds only: ${expected:-nothing}" ||
    fail "$name: $dir holds '$found', expected '$expected' (a temporary or half-written file?)"
}

# --- missing directory
name=missing_dir
mkdir -p "$WORK/$name"
STRATA_SHUTDOWN="$WORK/$name/no-such-dir/p.json" run_profiled "$name" "$program" "${short[@]}"
check_run "$name" "$WORK/$name/no-such-dir/p.json" "No such file or directory"
no_leftovers "$name" "$WORK/$name"

# --- a regular file where a directory should be
name=file_as_parent
mkdir -p "$WORK/$name"
echo "not a directory" >"$WORK/$name/parent"
STRATA_SHUTDOWN="$WORK/$name/parent/p.json" run_profiled "$name" "$program" "${short[@]}"
check_run "$name" "$WORK/$name/parent/p.json" "Not a directory"
no_leftovers "$name" "$WORK/$name" parent
[[ "$(cat "$WORK/$name/parent")" == "not a directory" ]] || fail "$name: the parent file changed"

# --- the path is a directory
name=directory
mkdir -p "$WORK/$name/p.json"
echo keep >"$WORK/$name/p.json/inside"
STRATA_SHUTDOWN="$WORK/$name/p.json" run_profiled "$name" "$program" "${short[@]}"
check_run "$name" "$WORK/$name/p.json" "directory"
no_leftovers "$name" "$WORK/$name" p.json
no_leftovers "$name" "$WORK/$name/p.json" inside

# --- the path is a character device (/dev/null's numbers) or a named pipe
name=device
mkdir -p "$WORK/$name"
if mknod "$WORK/$name/p.json" c 1 3 2>"$WORK/$name.mknod"; then
  STRATA_SHUTDOWN="$WORK/$name/p.json" run_profiled "$name" "$program" "${short[@]}"
  check_run "$name" "$WORK/$name/p.json" "not a regular file"
  no_leftovers "$name" "$WORK/$name" p.json
  [[ -c "$WORK/$name/p.json" ]] && pass "$name: the device is still there" ||
    fail "$name: the device node was replaced: $(ls -l "$WORK/$name/p.json")"
else
  fail "$name: cannot make a device node (needs root): $(cat "$WORK/$name.mknod")"
fi
name=fifo
mkdir -p "$WORK/$name"
mkfifo "$WORK/$name/p.json"
STRATA_SHUTDOWN="$WORK/$name/p.json" run_profiled "$name" "$program" "${short[@]}"
check_run "$name" "$WORK/$name/p.json" "not a regular file"
no_leftovers "$name" "$WORK/$name" p.json
[[ -p "$WORK/$name/p.json" ]] && pass "$name: the named pipe is still there" ||
  fail "$name: the named pipe was replaced: $(ls -l "$WORK/$name/p.json")"

# --- read-only and full file systems, in a private mount namespace.
# in_namespace NAME SIZE MODE: mounts a tmpfs of SIZE at $WORK/NAME/fs holding an older
# profile (p.json, 3 kB of known bytes); MODE "ro" remounts it read-only, "full" fills it up
# to a few kB; runs the program with STRATA_SHUTDOWN=<fs>/p.json; records the status, the
# listing and checksums of the file system in $WORK/NAME.* (the mount ends with the namespace).
older_profile="$WORK/older.json"
{
  echo '{"meta":{"version":27},"threads":[],"note":"an older profile that must survive"'
  head -c 3000 /dev/zero | tr '\0' ' '
  echo '}'
} >"$older_profile"
in_namespace() {
  local name="$1" size="$2" mode="$3"
  local fs="$WORK/$name/fs"
  mkdir -p "$fs"
  NAME="$name" FS="$fs" SIZE="$size" MODE="$mode" OLDER="$older_profile" WORK="$WORK" \
    LIB="$STRATA_PRELOAD" PROGRAM="$program" ARGS="${short[*]}" \
    unshare --mount --propagation private -- bash -c '
      set -u
      mount -t tmpfs -o size=$SIZE strata-hostile "$FS" || { echo "mount failed" >"$WORK/$NAME.setup"; exit 90; }
      cp "$OLDER" "$FS/p.json"
      if [[ $MODE == ro ]]; then
        mount -o remount,ro "$FS" || { echo "remount ro failed" >"$WORK/$NAME.setup"; exit 91; }
      else
        # Fill all but ~4 kB: dd stops at ENOSPC; then give back one small file.
        dd if=/dev/zero of="$FS/filler" bs=1k count=1000 2>/dev/null
        rm -f "$FS/filler"
        dd if=/dev/zero of="$FS/filler" bs=1k count=$(( $(df -k --output=avail "$FS" | tail -1) - 4 )) 2>/dev/null
      fi
      df -k "$FS" | tail -1 >"$WORK/$NAME.df"
      env LD_PRELOAD="$LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$FS/p.json" $PROGRAM $ARGS \
        >"$WORK/$NAME.out" 2>"$WORK/$NAME.err"
      echo $? >"$WORK/$NAME.status"
      ls -A "$FS" | sort | tr "\n" " " >"$WORK/$NAME.listing"
      cmp -s "$FS/p.json" "$OLDER" && echo same >"$WORK/$NAME.older" || echo changed >"$WORK/$NAME.older"
      exit 0'
  local rc=$?
  if ((rc != 0)); then
    fail "$name: cannot set up the file system (unshare/mount, needs root): rc $rc $(cat "$WORK/$name.setup" 2>/dev/null)"
    return 1
  fi
  RUN_STATUS=$(cat "$WORK/$name.status")
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
  echo "--- $name: file system: $(cat "$WORK/$name.df")"
  return 0
}
check_namespace_run() {
  local name="$1" reason="$2" expected_listing="$3"
  check_run "$name" "$WORK/$name/fs/p.json" "$reason"
  local listing
  listing=$(cat "$WORK/$name.listing")
  [[ "$listing" == "$expected_listing" ]] && pass "$name: the file system holds only: $listing" ||
    fail "$name: the file system holds '$listing', expected '$expected_listing' (a temporary file?)"
  [[ "$(cat "$WORK/$name.older")" == same ]] && pass "$name: the older profile is intact" ||
    fail "$name: the older profile at the path was changed"
}

name=read_only
in_namespace "$name" 1m ro && check_namespace_run "$name" "Read-only file system" "p.json "
name=full
in_namespace "$name" 64k full && check_namespace_run "$name" "No space left on device" "filler p.json "

finish
