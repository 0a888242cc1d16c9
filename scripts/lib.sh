# Shared by scripts/run and scripts/test: install what is missing, configure and build.
# Sourced, not executed.

STRATA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian packages the build and tests need.
STRATA_PACKAGES=(cmake ninja-build ccache g++ pkg-config git
  libsimdjson-dev nlohmann-json3-dev libcli11-dev libfmt-dev libicu-dev libcurl4-openssl-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev libyaml-cpp-dev
  libsqlite3-dev libhnswlib-dev libssl-dev libpq-dev libstemmer-dev libxml2-dev libpoppler-cpp-dev
  python3-dev pybind11-dev python3-venv python3-pip python3-setuptools)
# Only the test script needs these (libFuzzer runs under clang; Python's Jinja2 is the prompt engine's
# reference; pytest runs the Python module's tests; the viewer's tests drive Chromium; the PostgreSQL backend's tests start a throwaway cluster;
# groff's gropdf makes the PDF the ingestion tests read).
STRATA_TEST_PACKAGES=(clang curl libclang-rt-14-dev python3 python3-jinja2 python3-yaml python3-pytest chromium fonts-dejavu-core postgresql-15 groff)

# npm packages: the tokenizer vocabularies (tiktoken's encoders/*.json), the reference tokenizers the
# tests and benchmarks compare against, the streaming peers of the LLM benchmark (eventsource-parser,
# the OpenAI Node SDK), the official API and MCP clients the server is tested with, and puppeteer-core
# (which drives Debian's chromium; it downloads no browser), and the TypeScript compiler and openapi-typescript
# that build clients/typescript. Installed into a cache outside the repository, pinned.
STRATA_NPM_CACHE=${STRATA_NPM_CACHE:-$HOME/.cache/strata/npm}
STRATA_NPM_PACKAGES=(tiktoken@1.0.22 gpt-tokenizer@4.0.0 eventsource-parser@4.1.3 openai@7.57.0 @anthropic-ai/sdk@1.13.0
                     @modelcontextprotocol/sdk@1.32.2 puppeteer-core@24.43.1 typescript@5.9.3 openapi-typescript@7.13.0)
export STRATA_NPM_CACHE

# Each line says how long the script has run (bash's SECONDS), so a slow stage shows in CI's log.
strata_log() { printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

# strata_install PACKAGE... installs the packages that are not installed yet.
strata_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  strata_log "installing: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# strata_npm_setup installs the pinned npm packages into $STRATA_NPM_CACHE unless they are there.
strata_npm_setup() {
  # Node and npm may come from elsewhere than Debian (as on the project's machines): only install Debian's
  # when the commands are missing.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then strata_install nodejs npm; fi
  local missing=0
  for spec in "${STRATA_NPM_PACKAGES[@]}"; do
    local name=${spec%@*} version=${spec##*@}
    local pkg="$STRATA_NPM_CACHE/node_modules/$name/package.json"
    if [ ! -f "$pkg" ] || ! grep -q "\"version\": \"$version\"" "$pkg"; then missing=1; fi
  done
  [ $missing -eq 0 ] && return 0
  strata_log "installing npm packages into $STRATA_NPM_CACHE: ${STRATA_NPM_PACKAGES[*]}"
  mkdir -p "$STRATA_NPM_CACHE"
  [ -f "$STRATA_NPM_CACHE/package.json" ] || echo '{"private": true, "type": "module"}' > "$STRATA_NPM_CACHE/package.json"
  (cd "$STRATA_NPM_CACHE" && npm install --save-exact --no-audit --no-fund --silent "${STRATA_NPM_PACKAGES[@]}" >/dev/null)
}

# strata_build PRESET [TARGET...] configures (once) and builds.
strata_build() {
  local preset=$1; shift
  local dir
  case "$preset" in
    dev) dir=build ;;
    *) dir=build-$preset ;;
  esac
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/strata-ccache}
  # Paths relative to the checkout, so that another clone of the project (CI's) hits the same cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$STRATA_ROOT}
  # With -g, ccache also hashes the working directory unless told not to: another clone (CI's) would miss
  # every object. The cost: debug info may name the directory of the clone that filled the cache.
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  # A tree configured before the presets last changed (another compiler, other options) is made again:
  # cmake does not apply a preset's new values to an existing cache by itself.
  if [ -f "$STRATA_ROOT/$dir/CMakeCache.txt" ] && [ "$STRATA_ROOT/CMakePresets.json" -nt "$STRATA_ROOT/$dir/CMakeCache.txt" ]; then
    strata_log "the presets changed since $dir was configured: configuring it again"
    rm -rf "${STRATA_ROOT:?}/$dir"
  fi
  if [ ! -f "$STRATA_ROOT/$dir/build.ninja" ]; then
    strata_log "configuring ($preset)"
    cmake --preset "$preset" -S "$STRATA_ROOT" >/dev/null
  fi
  strata_log "building ($preset)"
  cmake --build "$STRATA_ROOT/$dir" -- "$@"
}
