# Sourced by scripts/test: the Debian packages the suite needs beyond Python, installed when missing (as root,
# or with password-less sudo). PostgreSQL's server binaries for the store tests (found as tests/pg_cluster.py
# finds them); Go and its gRPC packages for tests/test_go_client.py, which builds in GOPATH mode (no module
# proxy reaches these machines): github.com/golang/protobuf must be 1.5 (the 1.3 of golang-goprotobuf-dev
# panics in makeOneOfMarshaler, and conflicts with it); valgrind for bench.instructions (tests/test_bench.py). A test
# whose tool is still missing fails, naming it.
go_packages=(golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev golang-google-grpc-dev golang-google-genproto-dev)
wanted=()
"${A2A_GRPC_PYTHON:-python3}" tests/pg_cluster.py >/dev/null 2>&1 || wanted+=(postgresql)
for package in "${go_packages[@]}" valgrind; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$package" 2>/dev/null | grep -q '^ii' || wanted+=("$package")
done
if [ "${#wanted[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo -n"
  echo "scripts/test: installing Debian's ${wanted[*]}" >&2
  if ! { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${wanted[@]}" >/dev/null; }; then
    echo "scripts/test: could not install ${wanted[*]} (needs root or sudo): the tests that need them will fail" >&2
  fi
fi
