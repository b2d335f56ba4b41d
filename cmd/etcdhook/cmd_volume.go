package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/etcdhook/etcdhook/membership"
)

// runPVC: etcdhook pvc delete --claim=… --namespace=… --cluster-uid=… --peer-url=… --endpoints=…
func runPVC(args []string) error {
	if len(args) > 0 && args[0] == "grow" {
		return runPVCGrow(args[1:])
	}
	if len(args) == 0 || args[0] != "delete" {
		return usageError{errors.New("usage: etcdhook pvc delete --claim=NAME --namespace=NS --cluster-uid=UID --peer-url=URL --pod=NAME --endpoints=URL,…")}
	}
	fs := flag.NewFlagSet("pvc delete", flag.ContinueOnError)
	f := addClaimFlags(fs, "delete", "ClaimDeleted")
	peerURL := fs.String("peer-url", "", "peer URL of the removed member: no member may have it")
	pod := fs.String("pod", "", "the member pod, which must be gone")
	endpoints := fs.String("endpoints", "", "comma-separated client URLs of voters")
	if err := parseFlags(fs, args[1:], "claim", "namespace", "cluster-uid", "peer-url", "endpoints"); err != nil {
		return err
	}
	return runClaimJob(f, "etcdhook-pvc-delete", func(j *claimJob) error {
		return membership.DeletePVC(j.ctx, j.etcd, j.kube, j.log, membership.PVCRequest{
			Namespace: *f.ns, Claim: *f.claim, ClusterUID: *f.uid, PeerURL: *peerURL, Pod: *pod, Endpoints: strings.Split(*endpoints, ","),
			Events: j.events,
		})
	})
}

// runPVCGrow: etcdhook pvc grow --claim=… --namespace=… --cluster-uid=… --size=… --pod=… --endpoints=…
func runPVCGrow(args []string) error {
	fs := flag.NewFlagSet("pvc grow", flag.ContinueOnError)
	f := addClaimFlags(fs, "grow", "VolumeGrown")
	size := fs.String("size", "", "the size to ask for (a Kubernetes quantity, e.g. 20Gi)")
	pod := fs.String("pod", "", "the member pod mounting the claim (restarted only for a driver that grows file systems offline)")
	peerURL := fs.String("peer-url", "", "the peer URL of that pod's member (which may be down; every other must be healthy)")
	endpoints := fs.String("endpoints", "", "comma-separated client URLs of voters (health check before a restart)")
	restartAfter := fs.Duration("restart-after", 2*time.Minute, "restart the pod when the file system resize is pending this long")
	if err := parseFlags(fs, args, "claim", "namespace", "cluster-uid", "size", "endpoints"); err != nil {
		return err
	}
	q, err := parseSize(*size)
	if err != nil {
		return err
	}
	return runClaimJob(f, "etcdhook-pvc-grow", func(j *claimJob) error {
		return membership.GrowPVC(j.ctx, j.etcd, j.kube, j.log, membership.GrowRequest{
			Namespace: *f.ns, Claim: *f.claim, ClusterUID: *f.uid, Size: q, Pod: *pod, PeerURL: *peerURL, Endpoints: strings.Split(*endpoints, ","),
			RestartAfter: *restartAfter, Events: j.events,
		})
	})
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
	etcdAccessFlags(fs) // unused: every ops Job accepts them
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

// claimFlags are the flags a Job acting on one member claim shares (pvc delete, pvc grow); verb and
// event complete the help of --claim and --cluster.
type claimFlags struct {
	claim, ns, uid, cluster *string
	access                  etcdAccess
	timeout                 *time.Duration
}

func addClaimFlags(fs *flag.FlagSet, verb, event string) claimFlags {
	return claimFlags{
		claim:   fs.String("claim", "", "claim to "+verb),
		ns:      fs.String("namespace", os.Getenv("POD_NAMESPACE"), "namespace"),
		uid:     fs.String("cluster-uid", "", "the EtcdCluster UID the claim must be labelled with"),
		timeout: fs.Duration("timeout", 4*time.Minute, "give up after this long"),
		access:  etcdAccessFlags(fs),
		cluster: fs.String("cluster", "", "the EtcdCluster to post the "+event+" event on (default: from --claim)"),
	}
}

// claimJob is what a Job acting on one member claim (pvc delete, pvc grow) needs: the API, its deadline,
// a logger, the Events of the claim's EtcdCluster, and etcd's client (TLS with a client certificate
// directory).
type claimJob struct {
	kube   kubernetes.Interface
	ctx    context.Context
	log    *slog.Logger
	events *membership.KubeRecorder
	etcd   *membership.Etcd
}

// runClaimJob sets up a claimJob from its flags and runs do with it (a refusal exits 3), then flushes
// its Events. An empty --cluster is read from the claim's name.
func runClaimJob(f claimFlags, controller string, do func(j *claimJob) error) error {
	kube, err := inClusterKube()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *f.timeout)
	log := jsonLogger()
	cluster := *f.cluster
	if cluster == "" {
		cluster = clusterFromClaim(*f.claim)
	}
	events := membership.NewKubeRecorder(kube, *f.ns, cluster, *f.uid, controller, log)
	defer func() {
		events.Flush(5 * time.Second)
		events.Close()
		cancel()
	}()
	return refusal(do(&claimJob{kube: kube, ctx: ctx, log: log, events: events, etcd: f.access.etcd(log)}))
}

// clusterFromClaim reads the EtcdCluster's name from a member claim's name (data-<cluster>-<ordinal>,
// api.Names.PVC).
func clusterFromClaim(claim string) string {
	name, ok := strings.CutPrefix(claim, "data-")
	i := strings.LastIndex(name, "-")
	if !ok || i <= 0 {
		return ""
	}
	return name[:i]
}
