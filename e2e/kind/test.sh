#!/usr/bin/env bash
# Runs the e2e suite against the Kind cluster made by up.sh, with the real Metacontroller. The suite runs
# in a pod (a Job with cluster-admin), where cluster DNS, Service and pod addresses answer as they do
# for any client; the local-path volumes are mounted at their node path for the data-loss scenario.
# Usage: e2e/kind/test.sh [go test -run pattern]. Results: e2e/RESULTS-kind.md, log: e2e/kind-run.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLUSTER=${CLUSTER:-etcdhook-e2e}
RUN=${1:-.}
kubectl config use-context "kind-$CLUSTER"
work=$(mktemp -d e2e/.kind-XXXXXX)
trap 'rm -rf "$work"' EXIT

CGO_ENABLED=0 go test -c -tags e2e -o "$work/e2e.test" ./e2e/
cat > "$work/Dockerfile" <<'DOCKER'
FROM gcr.io/distroless/static-debian12:nonroot
COPY e2e.test /e2e/e2e.test
WORKDIR /e2e
ENTRYPOINT ["/e2e/e2e.test"]
DOCKER
docker build -t localhost/etcdhook-e2e:run "$work"
kind load docker-image --name "$CLUSTER" localhost/etcdhook-e2e:run

kubectl delete namespace etcdhook-e2e-runner --ignore-not-found --wait=true
kubectl apply -f - <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: etcdhook-e2e-runner}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner, namespace: etcdhook-e2e-runner}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: etcdhook-e2e-runner}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: runner, namespace: etcdhook-e2e-runner}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: e2e, namespace: etcdhook-e2e-runner}
spec:
  backoffLimit: 0
  activeDeadlineSeconds: 5400
  template:
    spec:
      serviceAccountName: runner
      restartPolicy: Never
      containers:
      - name: e2e
        image: localhost/etcdhook-e2e:run
        imagePullPolicy: IfNotPresent
        args: [-test.v, -test.count=1, -test.timeout=80m, -test.run=$RUN, -e2e.etcd-next=3.7.3, -e2e.results=-]
        volumeMounts: [{name: volumes, mountPath: /var/local-path-provisioner}]
      volumes:
      - name: volumes
        hostPath: {path: /var/local-path-provisioner, type: DirectoryOrCreate}
YAML
kubectl -n etcdhook-e2e-runner wait --for=condition=Ready pod -l job-name=e2e --timeout=120s || true
kubectl -n etcdhook-e2e-runner logs -f job/e2e | tee e2e/kind-run.log || true
sed -n '/^----- RESULTS.md -----$/,/^----- end -----$/p' e2e/kind-run.log | sed '1d;$d' > e2e/RESULTS-kind.md
kubectl -n etcdhook-e2e-runner wait --for=condition=Complete job/e2e --timeout=10s
