package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/membership"
)

// runPVCGrow: etcdhook pvc grow --claim=… --namespace=… --cluster-uid=… --size=… --pod=… --endpoints=…
func runPVCGrow(args []string) error {
	fs := flag.NewFlagSet("pvc grow", flag.ContinueOnError)
	claim := fs.String("claim", "", "claim to grow")
	ns := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "namespace")
	uid := fs.String("cluster-uid", "", "the EtcdCluster UID the claim must be labelled with")
	size := fs.String("size", "", "the size to ask for (a Kubernetes quantity, e.g. 20Gi)")
	pod := fs.String("pod", "", "the member pod mounting the claim (restarted only for a driver that grows file systems offline)")
	peerURL := fs.String("peer-url", "", "the peer URL of that pod's member (which may be down; every other must be healthy)")
	endpoints := fs.String("endpoints", "", "comma-separated client URLs of voters (health check before a restart)")
	restartAfter := fs.Duration("restart-after", 2*time.Minute, "restart the pod when the file system resize is pending this long")
	timeout := fs.Duration("timeout", 4*time.Minute, "give up after this long")
	tlsDir := fs.String("tls-dir", "", "client certificate directory (tls.crt, tls.key, ca.crt) when the cluster runs TLS")
	cluster := fs.String("cluster", "", "the EtcdCluster to post the VolumeGrown event on (default: from --claim)")
	if err := parseFlags(fs, args, "claim", "namespace", "cluster-uid", "size", "endpoints"); err != nil {
		return err
	}
	q, err := parseSize(*size)
	if err != nil {
		return err
	}
	j, done, err := newClaimJob(*claim, *ns, *cluster, *uid, "etcdhook-pvc-grow", *timeout, *tlsDir)
	if err != nil {
		return err
	}
	defer done()
	return refusal(membership.GrowPVC(j.ctx, j.etcd, j.kube, j.log, membership.GrowRequest{
		Namespace: *ns, Claim: *claim, ClusterUID: *uid, Size: q, Pod: *pod, PeerURL: *peerURL, Endpoints: strings.Split(*endpoints, ","),
		RestartAfter: *restartAfter, Events: j.events,
	}))
}

// runStatefulSet: etcdhook statefulset orphan --name=… --uid=… --size=…
func runStatefulSet(args []string) error {
	if len(args) == 0 || args[0] != "orphan" {
		return usageError{errors.New("usage: etcdhook statefulset orphan --name=NAME --namespace=NS --uid=UID --size=QUANTITY")}
	}
	fs := flag.NewFlagSet("statefulset orphan", flag.ContinueOnError)
	name := fs.String("name", "", "the StatefulSet")
	ns := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "namespace")
	uid := fs.String("uid", "", "the StatefulSet's UID as the hook saw it")
	size := fs.String("size", "", "the claim template size wanted")
	timeout := fs.Duration("timeout", 4*time.Minute, "give up after this long")
	fs.String("tls-dir", "", "unused (every ops Job accepts it)")
	if err := parseFlags(fs, args[1:], "name", "namespace", "uid", "size"); err != nil {
		return err
	}
	q, err := parseSize(*size)
	if err != nil {
		return err
	}
	kube, err := inClusterKube()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	return membership.OrphanStatefulSet(ctx, kube, jsonLogger(), membership.OrphanRequest{Namespace: *ns, StatefulSet: *name, UID: *uid, Size: q})
}
