#!/usr/bin/env bash
# A single-node OpenSearch for the tests, the evaluation and the benchmarks, built from Maven Central:
# the integration-test distribution, the modules it lacks (analysis-common, lang-painless) and the k-NN
# plugin, of the version AWS OpenSearch Service runs for the stack (cdk.json: 2.19).
#
# The k-NN plugin on Maven Central is its Java part only: no lib/ folder, none of the JNI libraries
# (libopensearchknn_faiss*.so, libopensearchknn_common.so, libopensearchknn_util.so) that the full
# distribution ships, and the first faiss index write then kills the node (UnsatisfiedLinkError). They
# are built here, once, from k-NN's own JNI sources and the faiss commit its 2.19.1.0 tag pins, both
# kept beside this script (knn-jni-<version>.tar.xz; README.md says where they come from), with
# Debian's compilers, OpenBLAS and LAPACK. The build is generic x86-64 (no AVX2/AVX-512 variant):
# the node is told to load that one.
#
#   scripts/opensearch.sh fetch                  download and assemble once into the cache
#   scripts/opensearch.sh start RUN_DIR          start a node on a free loopback port; prints its URL
#   scripts/opensearch.sh stop RUN_DIR           stop it (and remove RUN_DIR)
#   scripts/opensearch.sh run -- COMMAND...      start a node, run COMMAND with CITEWISE_OPENSEARCH_URL set,
#                                                stop the node whatever COMMAND's outcome, exit with its status
#
# OpenSearch refuses to run as root: as root the node runs as the user `citewise-opensearch` (created
# here if missing) and the cache lives in /var/cache, where that user can read it; otherwise it runs as
# the caller with the cache under ~/.cache. HTTP listens on 127.0.0.1 only; there is no security plugin.
set -euo pipefail

OPENSEARCH_VERSION="${CITEWISE_OPENSEARCH_VERSION:-2.19.1}"
KNN_VERSION="${OPENSEARCH_VERSION}.0"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KNN_SOURCES="$HERE/knn-jni-$KNN_VERSION.tar.xz"
BUILD_PACKAGES=(cmake g++ gfortran make libopenblas-dev liblapack-dev zlib1g-dev)
HEAP="${CITEWISE_OPENSEARCH_HEAP:-768m}"
NODE_USER=citewise-opensearch
if [ "$(id -u)" = 0 ]; then
	CACHE_ROOT="${CITEWISE_OPENSEARCH_CACHE:-/var/cache/citewise-opensearch}"
else
	CACHE_ROOT="${CITEWISE_OPENSEARCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/citewise-opensearch}"
fi
CACHE="$CACHE_ROOT/$OPENSEARCH_VERSION"
HOME_DIR="$CACHE/opensearch-$OPENSEARCH_VERSION"
STAMP="$CACHE/.assembled"

log() { echo "opensearch.sh: $*" >&2; }

java_home() {
	if [ -n "${OPENSEARCH_JAVA_HOME:-}" ]; then echo "$OPENSEARCH_JAVA_HOME"; return; fi
	if [ -n "${JAVA_HOME:-}" ]; then echo "$JAVA_HOME"; return; fi
	dirname "$(dirname "$(readlink -f "$(command -v java)")")"
}

# mvn copies an artifact into a directory, failing on a checksum mismatch (-C, strict checksums).
maven_copy() {
	mvn -q -B -C dependency:copy -Dartifact="$1" -DoutputDirectory="$2" -Dmdep.overWriteIfNewer=true >&2
}

# A module's jar and its direct dependencies (each module pins them with exclusions, so no transitive ones)
# as OpenSearch's own distribution lays a module out.
install_module() {
	local name=$1 classname=$2 extended=$3 work=$4
	local dir="$HOME_DIR/modules/$name"
	mkdir -p "$dir" "$work/$name"
	cat >"$work/$name/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>citewise.test</groupId><artifactId>$name-module</artifactId><version>1</version>
<dependencies><dependency><groupId>org.opensearch.plugin</groupId><artifactId>$name</artifactId>
<version>$OPENSEARCH_VERSION</version>
<exclusions><exclusion><groupId>org.opensearch</groupId><artifactId>opensearch</artifactId></exclusion></exclusions>
</dependency></dependencies></project>
POM
	# OpenSearch's core is excluded: the node has it already
	(cd "$work/$name" && mvn -q -B -C dependency:copy-dependencies -DoutputDirectory="$dir" -DincludeScope=runtime >&2)
	cat >"$dir/plugin-descriptor.properties" <<PROPS
description=$name (module, from Maven Central)
version=$OPENSEARCH_VERSION
name=$name
classname=$classname
java.version=11
opensearch.version=$OPENSEARCH_VERSION
extended.plugins=$extended
has.native.controller=false
PROPS
}

# Debian's build tools and libraries for the JNI build (as root, else through sudo), if any is missing.
install_build_packages() {
	local missing=()
	for package in "${BUILD_PACKAGES[@]}"; do
		dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
	done
	[ ${#missing[@]} = 0 ] && return
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	log "installing ${missing[*]} for the k-NN JNI build"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

build_knn_native() {
	local work=$1
	[ -f "$KNN_SOURCES" ] || { log "no k-NN JNI sources for $KNN_VERSION at $KNN_SOURCES"; exit 1; }
	install_build_packages
	log "building k-NN's faiss JNI library (once; about 10 minutes on 2 cores)"
	tar -xJf "$KNN_SOURCES" -C "$work"
	local jni="$work/knn-jni/jni"
	# faiss comes with k-NN's four patches applied already (README.md), as k-NN's CMake applies them
	(cd "$jni" && JAVA_HOME="$(java_home)" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
		-DKNN_PLUGIN_VERSION="$KNN_VERSION" -DCONFIG_FAISS=ON -DCONFIG_NMSLIB=OFF -DCONFIG_TEST=OFF \
		-DAPPLY_LIB_PATCHES=false -DFAISS_ENABLE_EXTRAS=OFF \
		-DAVX2_ENABLED=false -DAVX512_ENABLED=false -DAVX512_SPR_ENABLED=false >"$work/cmake.log" 2>&1) \
		|| { tail -30 "$work/cmake.log" >&2; exit 1; }
	(cd "$jni/build" && make -j"$(nproc)" opensearchknn_faiss opensearchknn_common >"$work/make.log" 2>&1) \
		|| { grep -m5 -B2 -A5 'error' "$work/make.log" >&2; exit 1; }
	mkdir -p "$HOME_DIR/plugins/opensearch-knn/lib"
	cp "$jni"/release/libopensearchknn_*.so "$HOME_DIR/plugins/opensearch-knn/lib/"
}

fetch() {
	if [ -f "$STAMP" ]; then return; fi # assembled (the stamp is written last): nothing to wait for
	# one fetch at a time per cache (test processes that each start a node may ask together); the lock is
	# released before any node starts: a node would inherit descriptor 9 and hold the lock for its life,
	# so every other `start` would wait for that node to stop
	mkdir -p "$CACHE_ROOT"
	exec 9>"$CACHE_ROOT/.lock"
	flock 9
	if [ ! -f "$STAMP" ]; then assemble; fi
	exec 9>&-
}

assemble() {
	command -v mvn >/dev/null || { log "needs Maven (mvn) and a Java 17+ runtime"; exit 1; }
	local work
	work=$(mktemp -d)
	rm -rf "$HOME_DIR"
	mkdir -p "$CACHE"
	log "fetching OpenSearch $OPENSEARCH_VERSION and k-NN $KNN_VERSION from Maven Central into $CACHE"
	maven_copy "org.opensearch.distribution.integ-test-zip:opensearch:$OPENSEARCH_VERSION:zip" "$work"
	maven_copy "org.opensearch.plugin:opensearch-knn:$KNN_VERSION:zip" "$work"
	(cd "$CACHE" && unzip -q "$work/opensearch-$OPENSEARCH_VERSION.zip")
	install_module lang-painless org.opensearch.painless.PainlessPlugin "" "$work"
	# Painless compiles scripts into classes of its own loader (its policy in OpenSearch's source tree)
	cat >"$HOME_DIR/modules/lang-painless/plugin-security.policy" <<'POLICY'
grant {
  permission java.lang.RuntimePermission "createClassLoader";
  permission java.lang.RuntimePermission "getClassLoader";
};
POLICY
	install_module analysis-common org.opensearch.analysis.common.CommonAnalysisPlugin lang-painless "$work"
	mkdir -p "$HOME_DIR/plugins/opensearch-knn"
	(cd "$HOME_DIR/plugins/opensearch-knn" && unzip -q "$work/opensearch-knn-$KNN_VERSION.zip")
	build_knn_native "$work"
	rm -rf "$work"
	chmod -R a+rX "$CACHE"
	touch "$STAMP"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

node_user() {
	if [ "$(id -u)" != 0 ]; then id -un; return; fi
	id -u "$NODE_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$NODE_USER"
	echo "$NODE_USER"
}

# The node's own config directory (the distribution's files plus ours), data and logs, all in RUN_DIR.
start() {
	local run_dir=$1
	fetch
	local user port
	user=$(node_user)
	port=$(free_port)
	mkdir -p "$run_dir"
	run_dir=$(cd "$run_dir" && pwd)
	rm -rf "$run_dir/config" "$run_dir/data" "$run_dir/logs"
	cp -r "$HOME_DIR/config" "$run_dir/config"
	mkdir -p "$run_dir/data" "$run_dir/logs"
	cat >"$run_dir/config/opensearch.yml" <<YML
cluster.name: citewise-test
node.name: citewise-test
discovery.type: single-node
network.host: 127.0.0.1
http.port: $port
transport.port: $((port + 1))-$((port + 100))
path.data: $run_dir/data
path.logs: $run_dir/logs
# a test machine's disk may be fuller than a server's: never turn the index read-only for it
cluster.routing.allocation.disk.threshold_enabled: false
# Domain writes wait for the index's periodic refresh (refresh=wait_for; 1 s by default, as on AWS):
# the same semantics at a tenth of the wait, for a test suite that writes thousands of documents
cluster.default.index.refresh_interval: 100ms
# the JNI library built here is the generic one (see the top of this script)
knn.faiss.avx2.disabled: true
knn.faiss.avx512.disabled: true
knn.faiss.avx512_spr.disabled: true
YML
	chown -R "$user" "$run_dir"
	local started=$SECONDS
	# -d daemonizes once the node has bootstrapped; -p records its pid for `stop`
	# jvm.options writes its GC log and heap dumps under logs/ of the distribution, which is read-only here
	sed -i "s|logs/|$run_dir/logs/|g; s|=data|=$run_dir/data|g" "$run_dir/config/jvm.options"
	# the JNI libraries are found on the library path, as OpenSearch's own packages arrange it
	(runuser_cmd "$user" env LD_LIBRARY_PATH="$HOME_DIR/plugins/opensearch-knn/lib" OPENSEARCH_PATH_CONF="$run_dir/config" OPENSEARCH_JAVA_HOME="$(java_home)" \
		OPENSEARCH_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP" "$HOME_DIR/bin/opensearch" -d -p "$run_dir/opensearch.pid" >"$run_dir/logs/stdout.log" 2>&1) \
		|| { log "the node did not start; its log:"; tail -n 50 "$run_dir/logs/stdout.log" "$run_dir/logs/citewise-test.log" >&2; return 1; }
	local url="http://127.0.0.1:$port"
	for _ in $(seq 1 240); do
		if curl -sf "$url/_cluster/health?wait_for_status=yellow&timeout=1s" >/dev/null 2>&1; then
			echo "$url" >"$run_dir/url"
			log "OpenSearch $OPENSEARCH_VERSION up at $url in $((SECONDS - started)) s"
			echo "$url"
			return
		fi
		sleep 0.5
	done
	log "the node did not answer in 120 s; its log:"
	tail -50 "$run_dir/logs/citewise-test.log" >&2
	stop "$run_dir"
	return 1
}

runuser_cmd() {
	local user=$1
	shift
	if [ "$user" = "$(id -un)" ]; then "$@"; else runuser -u "$user" -- "$@"; fi
}

stop() {
	local run_dir=$1 pid
	if [ -f "$run_dir/opensearch.pid" ]; then
		pid=$(cat "$run_dir/opensearch.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$run_dir"
}

run() {
	local run_dir status=0
	run_dir=$(mktemp -d -t citewise-opensearch.XXXXXX)
	# expanded now: the EXIT trap runs after this function's locals are gone
	# shellcheck disable=SC2064
	trap "stop '$run_dir'" EXIT
	trap 'exit 130' INT TERM
	CITEWISE_OPENSEARCH_URL=$(start "$run_dir")
	export CITEWISE_OPENSEARCH_URL
	"$@" || status=$?
	return "$status"
}

case "${1:-}" in
fetch) fetch ;;
start) start "${2:?RUN_DIR}" ;;
stop) stop "${2:?RUN_DIR}" ;;
run)
	shift
	[ "${1:-}" = "--" ] && shift
	run "$@"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
