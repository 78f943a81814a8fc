#!/usr/bin/env bash
# Prepares a worker host for AdventureTime jobs: an SSH box (a Backend of `type: ssh`) or a SLURM
# login node (`type: slurm`). The controller ships the code and the worker runtime itself; a host
# only needs Node.js >= 20, python3 (and uv when the code has a pyproject.toml) and a root dir.
#
#   bash install.sh [--root DIR] [--check]
#   ssh user@host 'bash -s -- --check' < deploy/worker/install.sh   # as the controller will see it
#
# --root DIR  the Backend's `paths.root` (default ~/.adventuretime)
# --check     only report; create nothing
#
# It never downloads or installs anything: it says what is missing and how to install it.
# Safe to run again. Exit 0: ready. Exit 1: something required is missing. Exit 2: bad usage.
set -euo pipefail

usage() {
  printf '%s\n' \
    'Usage: bash install.sh [--root DIR] [--check]' \
    '' \
    'Prepares this host for AdventureTime jobs (a Backend of type ssh or slurm).' \
    '  --root DIR  the Backend'"'"'s paths.root (default ~/.adventuretime)' \
    '  --check     only report; create nothing' \
    'Downloads nothing. Exit 0: ready; 1: something required is missing; 2: bad usage.'
}

root=""
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --root)
      [ $# -ge 2 ] || { echo "install.sh: --root needs a directory" >&2; exit 2; }
      root=$2
      shift 2
      ;;
    --root=*)
      root=${1#--root=}
      shift
      ;;
    --check)
      check=1
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "install.sh: unknown argument: $1 (try --help)" >&2
      exit 2
      ;;
  esac
done

home=${HOME:-}
if [ -z "$home" ]; then
  home=$(cd && pwd)
fi
[ -n "$root" ] || root="$home/.adventuretime"
case "$root" in
  \~) root=$home ;;
  \~/*) root="$home/${root#\~/}" ;;
esac
case "$root" in
  /*) ;;
  *) root="$PWD/$root" ;;
esac
root=${root%/}

me=$(id -un 2>/dev/null || echo "${USER:-this user}")
missing=""
ok() { printf '  ok       %s\n' "$*"; }
note() { printf '  note     %s\n' "$*"; }
miss() {
  # $1 what, $2 why, $3 Debian/Ubuntu, $4 RHEL-likes, $5 (optional) without root
  missing="${missing:+$missing, }$1"
  printf '  MISSING  %s: %s\n' "$1" "$2"
  printf '           %-24s %s\n' 'Debian/Ubuntu:' "$3" 'RHEL/Rocky/Alma/Fedora:' "$4"
  if [ -n "${5:-}" ]; then printf '           %-24s %s\n' 'without root:' "$5"; fi
}

echo "AdventureTime worker check on $(uname -n 2>/dev/null || echo this host) as $me"
echo

echo "Tools (looked up in this shell's PATH; the controller's non-interactive ssh shell must see the same):"

# Node.js >= 20: runs the worker runtime (adv exec) the controller ships.
node_hint_deb='Debian 13+: sudo apt-get install -y nodejs; Debian 12, Ubuntu 22.04/24.04: their nodejs is too old, use the NodeSource nodejs 20 packages (https://github.com/nodesource/distributions)'
node_hint_rhel='sudo dnf module enable -y nodejs:20 && sudo dnf install -y nodejs   (RHEL/Rocky/Alma 8-9; Fedora 39+: sudo dnf install -y nodejs20)'
node_hint_user='module load nodejs/20 (HPC), or unpack a node-v20 linux tarball from https://nodejs.org/dist/ into ~/.local and put its bin/ on PATH in ~/.bashrc before any "non-interactive: return" line'
if node_path=$(command -v node 2>/dev/null); then
  if node_version=$(node --version 2>/dev/null); then
    node_major=${node_version#v}
    node_major=${node_major%%.*}
    case "$node_major" in
      '' | *[!0-9]*) node_major=0 ;;
    esac
    if [ "$node_major" -ge 20 ]; then
      ok "Node.js $node_version ($node_path)"
    else
      miss "Node.js >= 20" "found $node_version at $node_path, too old" "$node_hint_deb" "$node_hint_rhel" "$node_hint_user"
    fi
  else
    miss "Node.js >= 20" "$node_path does not run (node --version failed)" "$node_hint_deb" "$node_hint_rhel" "$node_hint_user"
  fi
else
  miss "Node.js >= 20" "node is not in PATH" "$node_hint_deb" "$node_hint_rhel" "$node_hint_user"
fi

# python3: what the training code runs with.
if py_path=$(command -v python3 2>/dev/null) && py_version=$(python3 --version 2>&1); then
  ok "$py_version ($py_path)"
else
  miss "python3" "python3 is not in PATH (the training code runs with it)" \
    "sudo apt-get install -y python3" "sudo dnf install -y python3" "module load python/3, or a conda/pyenv python on PATH"
fi

# tar + gzip: the bootstrap unpacks the code payload (a .tar.gz) with them.
for tool in tar gzip; do
  if tool_path=$(command -v "$tool" 2>/dev/null); then
    ok "$tool ($tool_path)"
  else
    miss "$tool" "the job bootstrap unpacks the code with tar -xzf" \
      "sudo apt-get install -y $tool" "sudo dnf install -y $tool"
  fi
done

# setsid + nohup: how a `type: ssh` backend detaches a job from the ssh session.
for tool in setsid nohup; do
  if tool_path=$(command -v "$tool" 2>/dev/null); then
    ok "$tool ($tool_path)"
  else
    pkg=util-linux
    [ "$tool" = nohup ] && pkg=coreutils
    miss "$tool" "an ssh backend starts jobs with setsid nohup" \
      "sudo apt-get install -y $pkg" "sudo dnf install -y $pkg"
  fi
done

# uv: optional; used only when the code has a pyproject.toml (the bootstrap runs `uv sync`).
if uv_path=$(command -v uv 2>/dev/null); then
  ok "$(uv --version 2>/dev/null || echo uv) ($uv_path)"
else
  note "uv not found: optional, needed only when the code has a pyproject.toml (jobs then run 'uv sync')."
  note "  install: pipx install uv (Debian/Ubuntu: sudo apt-get install -y pipx; RHEL-likes: sudo dnf install -y pipx),"
  note "  or python3 -m pip install --user uv, or see https://docs.astral.sh/uv/getting-started/installation/"
fi

# git: optional; the controller ships code as a tarball, workers never clone the specs repo.
if git_path=$(command -v git 2>/dev/null); then
  ok "$(git --version 2>/dev/null || echo git) ($git_path)"
else
  note "git not found: optional (AdventureTime does not need it on a worker; your setup steps might)."
  note "  install: sudo apt-get install -y git / sudo dnf install -y git"
fi

# SLURM: jobs run on compute nodes, which need the same tools as this login node.
if command -v sbatch >/dev/null 2>&1; then
  note "sbatch found: this looks like a SLURM login node. Jobs run on the compute nodes: check one too, e.g."
  self=install.sh
  if [ -f "$0" ]; then self=$0; fi
  note "  srun -N1 -n1 bash $self --check --root $root"
fi

echo
echo "Root directory: $root"
mode_of() { stat -c %a "$1" 2>/dev/null || stat -f %Lp "$1" 2>/dev/null || echo '?'; }
subdirs="code runtime work logs"
if [ "$check" = 1 ]; then
  if [ -d "$root" ]; then
    for d in "" $subdirs; do
      p="$root${d:+/$d}"
      if [ ! -d "$p" ]; then
        note "$p does not exist yet (install.sh without --check creates it; so does the controller)"
      elif [ ! -w "$p" ]; then
        miss "a writable $p" "$me cannot write it" "sudo chown -R $me $root" "sudo chown -R $me $root"
      else
        m=$(mode_of "$p")
        if [ "$m" = 700 ]; then ok "$p (mode 700)"; else note "$p has mode $m; install.sh sets 700"; fi
      fi
    done
  else
    note "$root does not exist yet: run install.sh without --check to create it"
  fi
elif [ "$root" = "" ] || [ "$root" = "$home" ] || { [ -d "$root" ] && [ -k "$root" ]; }; then
  # Never chmod 700 a home or a shared dir such as /tmp (sticky bit): use a folder inside it.
  miss "a dedicated root" "$root/ is a home or shared directory; pass --root $root/adventuretime or similar" \
    "install.sh --root ${root:-/}/adventuretime" "install.sh --root ${root:-/}/adventuretime"
elif ! mkdir -p "$root" 2>/dev/null || [ ! -w "$root" ]; then
  miss "a writable $root" "cannot create or write it as $me" \
    "sudo install -d -o $me -m 700 $root" "sudo install -d -o $me -m 700 $root" \
    "choose another --root under your home or scratch space"
elif ! chmod 700 "$root" 2>/dev/null; then
  miss "a root owned by $me" "cannot chmod 700 $root" "sudo chown $me $root" "sudo chown $me $root"
else
  for d in $subdirs; do
    mkdir -p "$root/$d"
    chmod 700 "$root/$d"
  done
  ok "$root with code/ runtime/ work/ logs/ (mode 700)"
fi
fs=$(stat -f -c %T "$root" 2>/dev/null || true)
if [ -n "$fs" ]; then
  note "filesystem type: $fs (for SLURM the root must be on a filesystem the compute nodes mount too)"
fi

# The Backend spec line: ~/... when under the home dir, as the controller expands ~ on the host.
# shellcheck disable=SC2088 # a literal ~ for the spec, not for this shell
case "$root" in
  "$home/.adventuretime") spec_root="~/.adventuretime" ;;
  "$home"/*) spec_root="~/${root#"$home"/}" ;;
  *) spec_root=$root ;;
esac
echo
echo "Put this in the Backend spec (spec.paths.root):"
echo
echo "  paths:"
echo "    root: $spec_root"
case "$spec_root" in
  \~/.adventuretime) echo "  (that is the default: you may leave paths.root out)" ;;
esac
echo

if [ -n "$missing" ]; then
  echo "NOT READY: missing $missing. Install what is marked MISSING above, then run this again."
  exit 1
fi
echo "READY: this host can run AdventureTime jobs."
