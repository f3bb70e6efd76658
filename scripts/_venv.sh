# Sourced by the scripts: make sure .venv exists and holds the project with the given extras
# (`_venv.sh EXTRAS [SUPERSET...]`: an install of a superset of EXTRAS, such as test for serve, also does).
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-}"
python="${A2A_GRPC_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
stamp=".venv/.a2a-grpc-installed${extras:+-$extras}"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
installed=""
candidates=("$stamp")
for superset in "${@:2}"; do candidates+=(".venv/.a2a-grpc-installed-$superset"); done
for candidate in "${candidates[@]}"; do
  if [ -f "$candidate" ] && [ "$(cat "$candidate")" = "$want" ]; then installed=yes; fi
done
if [ -z "$installed" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi
