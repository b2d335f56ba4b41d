package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/membership"
)

// jsonLogger logs JSON lines to stderr at --log-level.
func jsonLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: &logLevel}))
}

// runAgent: etcdhook agent --config=/etc/etcdhook/agent.json -- /usr/local/bin/etcd <static flags>
func runAgent(args []string) error {
	configPath, transition, etcdCmd, err := parseAgentArgs(args)
	if err != nil {
		return err
	}
	// What the pod's template says is the truth for this pod: etcd's flags (its certificate files) and
	// the transition flag. agent.json comes from a ConfigMap the kubelet refreshes on its own schedule, so
	// a pod created right after a TLS switch began may read the previous one: it waits for the TLS
	// settings its template needs, and ignores those a plaintext template does not use.
	tlsOn := slices.ContainsFunc(etcdCmd[1:], func(a string) bool { return strings.HasPrefix(a, "--cert-file=") })
	cfg, err := readAgentConfig(configPath, tlsOn)
	if err != nil {
		return err
	}
	pod, ns, podUID := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"), os.Getenv("POD_UID")
	if pod == "" || ns == "" || podUID == "" {
		return errors.New("POD_NAME, POD_NAMESPACE and POD_UID must be set (downward API)")
	}
	// The scheme of this agent's own clients and of a joining member's peer URL: in the transition the
	// scheme being left, which every member serves until the switch is over (docs/design/14-tls.md §14.8).
	names := api.Names{Cluster: cfg.Cluster, Namespace: ns, TLS: tlsOn}
	if transition != "" {
		names.TLS = transition == "https"
	}
	ordinal := names.PodOrdinal(pod)
	if ordinal < 0 {
		return fmt.Errorf("pod %s is not a member pod of %s", pod, cfg.Cluster)
	}
	log := jsonLogger().With("pod", pod)
	kcfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	// A look reads the member's Lease and, before etcd runs, every member Lease (about 10 GETs): at
	// client-go's default 5 requests/s a fast look (250 ms) would be throttled to one every 2 s.
	kcfg.QPS, kcfg.Burst = 50, 100
	duration := time.Duration(cfg.LeaseDurationSeconds) * time.Second
	store, err := membership.NewKubeLeases(kcfg, ns, cfg.Cluster, names.Lease(ordinal), cfg.ClusterUID, podUID, duration)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return err
	}
	// Events on the EtcdCluster (by the parent UID, which `kubectl describe` selects on).
	events := membership.NewKubeRecorder(kube, ns, cfg.Cluster, cfg.ClusterUID, "etcdhook-agent", log)
	defer func() {
		events.Flush(2 * time.Second) // a member that just left says so before the pod goes
		events.Close()
	}()
	agent := &membership.Agent{
		Cfg: membership.Self{
			Name:          pod,
			PeerURL:       names.PeerURL(ordinal),
			ClientURL:     fmt.Sprintf("%s127.0.0.1:%d", names.Scheme(), cfg.ClientPort),
			Endpoints:     []string{names.ClientEndpoint()},
			DataDir:       cfg.DataDir,
			ClusterUID:    cfg.ClusterUID,
			Adopt:         cfg.AdoptExistingData,
			LeaseDuration: duration,
			// Out of the client Service before etcd stops on purpose (docs/design/07-steps.md §7.14).
			DrainWait:       api.DrainWait,
			TerminatingWait: api.EndpointPropagation,
			EtcdCommand:     etcdCmd,
			Transition:      transition,
			Bootstrap:       cfg.Bootstrap,
			StaticPeers:     staticPeers(names),
		},
		Store:  store,
		Etcd:   &membership.Etcd{Log: log},
		Log:    log,
		Events: events,
	}
	if agent.Cfg.Retired, err = retiredClusters(cfg.RetiredClusters); err != nil {
		return err
	}
	// The list grows when an in-place restore commits, in the same answer that starts pod 0: a pod
	// whose volume the kubelet filled just before sees it on a later read (docs/design/16-backup-restore.md §16.8).
	agent.Cfg.LoadRetired = func() (map[uint64]bool, error) {
		b, err := os.ReadFile(configPath)
		if err != nil {
			return nil, err
		}
		var now api.AgentConfig
		if err := json.Unmarshal(b, &now); err != nil {
			return nil, fmt.Errorf("%s: %w", configPath, err)
		}
		return retiredClusters(now.RetiredClusters)
	}
	if r := cfg.Restore; r != nil {
		req, err := agentRestore(r, cfg, names, ordinal, pod, ns)
		if err != nil {
			return err
		}
		agent.Cfg.Restore = req
	}
	if tlsOn {
		certs, err := agentCerts(kcfg, cfg, names, ordinal, pod, log)
		if err != nil {
			return err
		}
		certs.Events = events
		agent.Certs = certs
		// A TLS switch on from plaintext: the members have data but no CA yet (docs/design/14-tls.md §14.8).
		if dataCheck := certs.MayCreateCA; transition == "http" {
			certs.MayCreateCA = func() bool { return dataCheck() || agent.PeersPlaintext() }
		}
		// The client plane's certificate is also the agent's client certificate, until spec.auth gives
		// it the root identity (docs/design/20-auth.md §20.2).
		agent.Etcd.TLSDir = api.TLSClientDir
		certs.RootDir = api.TLSRootDir
		agent.Cfg.AuthSource = authSource(kube, ns, names.ConfigMap())
	}
	probe, err := membership.ProbeHandler(agent, fmt.Sprintf("http://127.0.0.1:%d", cfg.EtcdMetricsPort))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", cfg.ProbePort))
	if err != nil {
		return err
	}
	go func() { _ = membership.NewProbeServer(probe).Serve(ln) }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return agent.Run(ctx)
}

// authSource reads the declared auth (the ConfigMap's auth.json) through the API, not the mounted file:
// the kubelet refreshes a ConfigMap volume only within a minute or so. No key: spec.auth is not set.
// The member Role may read the ConfigMap only while spec.auth is set; a refusal is then "not set".
func authSource(kube kubernetes.Interface, ns, name string) func(context.Context) (*api.AuthConfig, error) {
	return func(ctx context.Context) (*api.AuthConfig, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		v, ok := cm.Data[api.ConfigKeyAuth]
		if !ok {
			return nil, nil
		}
		return api.ParseAuthConfig([]byte(v))
	}
}

// agentCerts configures the member's certificates from the agent configuration (docs/design/14-tls.md §14).
func agentCerts(kcfg *rest.Config, cfg api.AgentConfig, names api.Names, ordinal int, pod string, log *slog.Logger) (*membership.Certs, error) {
	caDur, err := time.ParseDuration(cfg.TLS.CADuration)
	if err != nil {
		return nil, fmt.Errorf("tls.caDuration: %w", err)
	}
	certDur, err := time.ParseDuration(cfg.TLS.CertDuration)
	if err != nil {
		return nil, fmt.Errorf("tls.certDuration: %w", err)
	}
	var grace time.Duration // 0: Certs' default
	if cfg.TLS.RotationGrace != "" {
		if grace, err = time.ParseDuration(cfg.TLS.RotationGrace); err != nil {
			return nil, fmt.Errorf("tls.rotationGrace: %w", err)
		}
		if grace == 0 {
			grace = time.Nanosecond // none asked: Certs reads 0 as its default
		}
	}
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(os.Getenv("POD_IP")); ip != nil {
		ips = append(ips, ip)
	}
	return &membership.Certs{
		Store:    &membership.KubeSecrets{Client: kube, Namespace: names.Namespace, Cluster: names.Cluster, ClusterUID: cfg.ClusterUID},
		CASecret: cfg.TLS.CASecret, ClientSecret: cfg.TLS.ClientSecret,
		CADuration: caDur, CertDuration: certDur, ClientGrace: grace,
		PeerDir: api.TLSPeerDir, ClientDir: api.TLSClientDir,
		PeerSource: cfg.TLS.PeerSource, ClientSource: cfg.TLS.ClientSource,
		CommonName: pod, DNSNames: names.TLSNames(ordinal), IPs: ips,
		PeerNames: names.PeerTLSNames(ordinal), ClientNames: names.ClientTLSNames(ordinal),
		PeerDNSChecked: func(dns []string) bool { return names.PeerDNSChecked(dns, ordinal) },
		// A member with data of this very cluster runs on the CA it had and never makes a new one. A
		// member without data, or with data of another EtcdCluster (re-created on kept volumes: refused
		// as ForeignData, or adopted), may: that cluster's CA went with it.
		MayCreateCA: func() bool {
			d, err := membership.ReadData(cfg.DataDir)
			return err == nil && (!d.Present || d.Binding == nil || d.Binding.ClusterUID != cfg.ClusterUID)
		},
		Log: log,
	}, nil
}

// parseAgentArgs reads `agent [--config FILE] -- etcd [flags]`, the command the StatefulSet renders.
func parseAgentArgs(args []string) (configPath, transition string, etcdCmd []string, err error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&configPath, "config", api.AgentConfigPath, "agent configuration (the ConfigMap's agent.json)")
	fs.StringVar(&transition, strings.Trim(api.AgentFlagTLSTransition, "-="), "", "the transition template of a TLS switch: the scheme being left (http or https)")
	if err := parseFlags(fs, args); err != nil {
		return "", "", nil, err
	}
	etcdCmd = fs.Args()
	if len(etcdCmd) == 0 {
		return "", "", nil, usageError{errors.New("usage: etcdhook agent [--config FILE] [--tls-transition=http|https] -- etcd [flags]")}
	}
	if transition != "" && transition != "http" && transition != "https" {
		return "", "", nil, usageError{fmt.Errorf("--tls-transition=%s: http or https", transition)}
	}
	for _, a := range etcdCmd[1:] {
		if strings.HasPrefix(a, "--initial-cluster=") || strings.HasPrefix(a, "--initial-cluster-state=") {
			return "", "", nil, usageError{fmt.Errorf("%s is the agent's to decide", a)}
		}
	}
	if transition != "" && !slices.ContainsFunc(etcdCmd[1:], func(a string) bool { return strings.HasPrefix(a, "--cert-file=") }) {
		return "", "", nil, usageError{errors.New("--tls-transition needs etcd's certificate flags")}
	}
	return configPath, transition, etcdCmd, nil
}

// readAgentConfig reads agent.json; when the template runs TLS (tlsOn) and the file has no TLS settings
// yet (the kubelet has not refreshed it since a TLS switch began), it reads again every 2 s for up to
// 3 minutes: the kubelet refreshes ConfigMap volumes within about a minute.
func readAgentConfig(path string, tlsOn bool) (api.AgentConfig, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var cfg api.AgentConfig
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, err
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return cfg, fmt.Errorf("%s: %w", path, err)
		}
		if !tlsOn {
			cfg.TLS = nil // a plaintext template: settings left for the pods of a switch are not this pod's
			return cfg, nil
		}
		if cfg.TLS != nil {
			return cfg, nil
		}
		if time.Now().After(deadline) {
			return cfg, fmt.Errorf("%s has no TLS settings, which etcd's certificate flags need", path)
		}
		jsonLogger().Warn("agent.json has no TLS settings yet; reading it again", "path", path)
		time.Sleep(2 * time.Second)
	}
}

// runMember: etcdhook member remove --id=… --peer-url=… --reason=… --endpoints=…
func runMember(args []string) error {
	if len(args) == 0 || args[0] != "remove" {
		return usageError{errors.New("usage: etcdhook member remove --id=ID --endpoints=URL,… [--peer-url=URL] [--reason=R] [--timeout=D]")}
	}
	fs := flag.NewFlagSet("member remove", flag.ContinueOnError)
	id := fs.String("id", "", "member ID (hex)")
	peerURL := fs.String("peer-url", "", "the member's peer URL, checked before removing")
	reason := fs.String("reason", "", "why: dead, data-lost, leave, orphan, stuck-learner, unwanted-learner (re-checked)")
	endpoints := fs.String("endpoints", "", "comma-separated client URLs of voters")
	timeout := fs.Duration("timeout", 4*time.Minute, "give up after this long")
	access := etcdAccessFlags(fs)
	cluster := fs.String("cluster", "", "the EtcdCluster to post the MemberRemoved event on (default: from the Job's pod name)")
	ns := fs.String("namespace", "", "its namespace (default: $POD_NAMESPACE, else the service account's)")
	uid := fs.String("cluster-uid", "", "its UID (kubectl describe lists only events that carry it)")
	if err := parseFlags(fs, args[1:], "id", "endpoints"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	log := jsonLogger()
	if *cluster == "" {
		host, _ := os.Hostname() // the pod's name
		*cluster = clusterFromJobPod(host, "-rm-"+*id+"-")
	}
	events, flush := jobRecorder(*cluster, *ns, *uid, "etcdhook-member-remove", log)
	defer flush()
	err := membership.RemoveMember(ctx, access.etcd(log), log, membership.RemoveRequest{
		ID: *id, PeerURL: *peerURL, Reason: *reason, Endpoints: strings.Split(*endpoints, ","), Events: events,
	})
	return refusal(err)
}

// clusterFromJobPod reads the EtcdCluster's name from a Job pod's name (<cluster><marker>…, see
// api.Names.RemoveJob), "" when it does not have that form.
func clusterFromJobPod(pod, marker string) string {
	if i := strings.Index(pod, marker); i > 0 {
		return pod[:i]
	}
	return ""
}

// serviceAccountNamespace is where a pod with a mounted service account token finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// jobRecorder is the Events recorder of a Job: on the EtcdCluster when the Job knows which one and has
// API access, a no-op otherwise (said in the log; the Job's work does not depend on it). flush waits
// briefly for the events to be sent, since the Job exits right after its work.
func jobRecorder(cluster, ns, uid, controller string, log *slog.Logger) (membership.Recorder, func()) {
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	nop := func() {}
	if cluster == "" || ns == "" {
		log.Info("no events posted: the EtcdCluster's name or namespace is not known", "cluster", cluster, "namespace", ns)
		return membership.NopRecorder{}, nop
	}
	kube, err := inClusterKube()
	if err != nil {
		log.Info("no events posted: no API access", "error", err)
		return membership.NopRecorder{}, nop
	}
	if uid == "" {
		log.Info("events carry no EtcdCluster UID: kubectl get events lists them, kubectl describe does not")
	}
	r := membership.NewKubeRecorder(kube, ns, cluster, uid, controller, log)
	return r, func() {
		r.Flush(5 * time.Second)
		r.Close()
	}
}

// refusalError exits 3: the Job checked and declined (its reason no longer holds or quorum forbids).
type refusalError struct{ error }

func refusal(err error) error {
	if errors.Is(err, membership.ErrRefused) {
		return refusalError{err}
	}
	return err
}

// staticPeers lists the first n members of the cluster by pod name and peer URL: a static creation's
// initial cluster, the same in every member (names carries the scheme of the pod's template).
func staticPeers(names api.Names) func(n int) []api.Member {
	return func(n int) []api.Member {
		out := make([]api.Member, n)
		for i := range out {
			out[i] = api.Member{Name: names.Pod(i), PeerURL: names.PeerURL(i)}
		}
		return out
	}
}

// retiredClusters parses agent.json's retiredClusters.
func retiredClusters(ids []string) (map[uint64]bool, error) {
	var out map[uint64]bool
	for _, s := range ids {
		id, err := api.ParseID(s)
		if err != nil {
			return nil, fmt.Errorf("retiredClusters: %q is not a cluster ID", s)
		}
		if out == nil {
			out = map[uint64]bool{}
		}
		out[id] = true
	}
	return out, nil
}

// agentRestore is the seed's restore of a cluster created from a snapshot (docs/design/16-backup-restore.md §16.4).
// Every member gets it; only the seed of a cluster not yet bootstrapped acts on it.
func agentRestore(r *api.AgentRestore, cfg api.AgentConfig, names api.Names, ordinal int, pod, ns string) (*membership.RestoreRequest, error) {
	src, err := backup.ParseSource(r.From)
	if err != nil {
		return nil, fmt.Errorf("restore.from %q %v", r.From, err)
	}
	if r.FileRoot != "" {
		src.Destination = src.Destination.Under(r.FileRoot)
	}
	point := backup.Point{Revision: r.ToRevision}
	if r.ToTime != nil {
		point.Time = *r.ToTime
	}
	if err := point.Check(); err != nil {
		return nil, fmt.Errorf("restore point %v", err)
	}
	keys, err := backup.LoadKeysDir(r.EncryptionDir)
	if err != nil {
		return nil, err
	}
	return &membership.RestoreRequest{
		Source: src, Namespace: ns, Cluster: cfg.Cluster, CredentialsDir: r.CredentialsDir,
		DataDir: cfg.DataDir, Name: pod, PeerURL: names.PeerURL(ordinal), Token: cfg.Token, Point: point, Keys: keys,
		KeepRevisions: r.KeepRevisions,
	}, nil
}
