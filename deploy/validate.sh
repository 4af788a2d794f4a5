#!/usr/bin/env bash
# Validates every manifest under deploy/kubernetes/ (alternatives/ included) against the Kubernetes API
# schemas, offline: kubernetes-validate ships the schemas, so nothing is fetched at validation time.
#
#   bash deploy/validate.sh
#
# Fails on: a field the schema does not know (--strict, so a typo'd field is an error, not silently
# dropped), a wrong type or a missing required field, an unknown kind or apiVersion (the validator only
# warns about those), unparsable YAML, and a key given twice in one mapping (YAML keeps the last one, so
# a second `env:` would silently replace the first).
#
# Environment: K8S_VERSIONS (space-separated) overrides the Kubernetes versions validated against.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# Pinned, so every run validates against the same schemas; it ships schemas for Kubernetes 1.25–1.37.
KV_VERSION=1.37.0
# The oldest version the manifests promise to work on (every field they use is GA there, e.g.
# NetworkPolicy endPort) and the newest the validator knows.
K8S_VERSIONS=${K8S_VERSIONS:-"1.30.0 1.37.0"}

if ! python3 -c 'import kubernetes_validate' >/dev/null 2>&1; then
  echo "==> installing kubernetes-validate==$KV_VERSION" >&2
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KV_VERSION"
fi

mapfile -t files < <(find kubernetes -type f \( -name '*.yaml' -o -name '*.yml' \) | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "error: no manifests under deploy/kubernetes/" >&2
  exit 1
fi

status=0

echo "==> duplicate keys"
python3 - "${files[@]}" <<'PY' || status=1
import sys, yaml

class Loader(yaml.SafeLoader):
    pass

def mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)

Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
bad = 0
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            list(yaml.load_all(f, Loader=Loader))
    except yaml.YAMLError as e:
        print(f"ERROR {path}: {e}")
        bad = 1
sys.exit(bad)
PY

for v in $K8S_VERSIONS; do
  echo "==> kubernetes-validate $(python3 -m kubernetes_validate --version 2>&1) --strict, Kubernetes $v"
  out=$(python3 -m kubernetes_validate --strict --kubernetes-version "$v" "${files[@]}" 2>&1) || status=1
  printf '%s\n' "$out"
  # An unknown kind or apiVersion is only a warning there ("Couldn't find schema"); here it fails.
  if grep -q '^WARN' <<<"$out"; then status=1; fi
done

if [ "$status" -ne 0 ]; then
  echo "deploy/validate.sh: manifests FAILED validation" >&2
else
  echo "deploy/validate.sh: ${#files[@]} files valid"
fi
exit "$status"
