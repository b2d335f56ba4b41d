package plugin

import (
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/etcdhook/etcdhook/api"
)

// etcdctlPath is the etcdctl beside etcd in the member image (the official image and the local test
// images both ship /usr/local/bin/etcdctl).
var etcdctlPath = path.Join(path.Dir(api.EtcdBinary), "etcdctl")

// etcdContainer is the member pod's etcd container.
const etcdContainer = "etcd"

// etcdctlPlan is what `etcdctl` will run: where, and the full command line.
type etcdctlPlan struct {
	Pod     string
	Command []string
}

// planEtcdctl chooses the member pod and builds etcdctl's command line: the endpoints are the client
// URLs the voters advertise (so `endpoint status`/`endpoint health` cover the cluster), the
// certificates are the files the pod's etcd serves its client plane with (--cert-file, --key-file,
// --trusted-ca-file as the pod spec passes them), which the members' certificates also allow for client
// authentication. Flags the user gives win: each is added only if absent from args.
func planEtcdctl(ctx context.Context, c *Clients, name, member string, args []string) (*etcdctlPlan, error) {
	snap, err := getSnapshot(ctx, c, name)
	if err != nil {
		return nil, err
	}
	n := api.Names{Cluster: name, Namespace: c.Namespace}
	pods, err := c.Kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(n.Labels()).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the member pods: %w", err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		if n.PodOrdinal(pods.Items[i].Name) >= 0 {
			byName[pods.Items[i].Name] = &pods.Items[i]
		}
	}
	pod, err := choosePod(snap, n, byName, member)
	if err != nil {
		return nil, err
	}
	var ctr *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == etcdContainer {
			ctr = &pod.Spec.Containers[i]
		}
	}
	if ctr == nil {
		return nil, fmt.Errorf("pod %s has no container %q", pod.Name, etcdContainer)
	}
	etcdFlags := flagValues(append(append([]string(nil), ctr.Command...), ctr.Args...))
	tls := etcdFlags["cert-file"] != ""

	var endpoints []string
	for _, m := range snap.status.Members {
		if (m.Role == api.RoleLeader || m.Role == api.RoleVoter) && m.ClientURL != "" {
			endpoints = append(endpoints, m.ClientURL)
		}
	}
	sort.Strings(endpoints)
	if len(endpoints) == 0 {
		// No voter reported yet: the pod's own etcd, over loopback (its certificate covers localhost).
		n.TLS = tls
		endpoints = []string{fmt.Sprintf("%slocalhost:%d", n.Scheme(), api.ClientPort)}
	}
	user := flagValues(args)
	cmd := []string{etcdctlPath}
	if tls && snap.Status["auth"] != nil && etcdFlags["client-cert-auth"] == "false" {
		// etcd takes no user from a certificate it does not require: etcdctl logs in as root, with the
		// password the agent keeps beside the root certificate, passed by the agent binary through the
		// environment (never on the command line).
		cmd = []string{api.AgentBinary, "etcdctl-as-root", "--", etcdctlPath}
	}
	add := func(flag, value string) {
		if _, set := user[flag]; !set && value != "" {
			cmd = append(cmd, "--"+flag+"="+value)
		}
	}
	add("endpoints", strings.Join(endpoints, ","))
	switch {
	case tls && snap.Status["auth"] != nil:
		// spec.auth: the member certificate's CN (the pod) is no etcd user; the agent keeps the root
		// identity's files beside it (docs/design/20-auth.md §20.2).
		add("cacert", api.TLSRootDir+"/ca.crt")
		add("cert", api.TLSRootDir+"/tls.crt")
		add("key", api.TLSRootDir+"/tls.key")
	case tls:
		add("cacert", etcdFlags["trusted-ca-file"])
		add("cert", etcdFlags["cert-file"])
		add("key", etcdFlags["key-file"])
	}
	cmd = append(cmd, args...)
	return &etcdctlPlan{Pod: pod.Name, Command: cmd}, nil
}

// choosePod picks the pod to run etcdctl in: the one named by member (a pod name or an ordinal), else
// the first ready pod of a healthy voter, else the first ready member pod.
func choosePod(snap *Snapshot, n api.Names, pods map[string]*corev1.Pod, member string) (*corev1.Pod, error) {
	if member != "" {
		want := member
		if n.PodOrdinal(member) < 0 {
			want = n.Cluster + "-" + member
		}
		p, ok := pods[want]
		if !ok {
			return nil, fmt.Errorf("no member pod %q of %s/%s", want, n.Namespace, n.Cluster)
		}
		if !etcdReady(p) {
			return nil, fmt.Errorf("pod %s: container %s is not running and ready", p.Name, etcdContainer)
		}
		return p, nil
	}
	var voters []string
	for _, m := range snap.status.Members {
		if (m.Role == api.RoleLeader || m.Role == api.RoleVoter) && m.Healthy {
			voters = append(voters, m.Name)
		}
	}
	sort.Strings(voters)
	for _, name := range voters {
		if p, ok := pods[name]; ok && etcdReady(p) {
			return p, nil
		}
	}
	var names []string
	for name := range pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if etcdReady(pods[name]) {
			return pods[name], nil
		}
	}
	return nil, fmt.Errorf("no member pod of %s/%s has a ready %s container", n.Namespace, n.Cluster, etcdContainer)
}

func etcdReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == etcdContainer {
			return s.Ready
		}
	}
	return false
}

// flagValues maps the long flags of a command line (--flag=value or --flag value) to their values;
// it stops at "--". Enough to see which flags a user set and which files etcd was started with.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			continue // the agent's "-- etcd ..." separator: etcd's flags follow
		}
		if !strings.HasPrefix(a, "--") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && valueFlags[k] {
			v = args[i+1]
			i++
		}
		out[k] = v
	}
	return out
}

// valueFlags are the etcdctl and etcd flags this plugin reads or sets that take a value (so that
// "--endpoints x" is read as the flag's value, not as a command word).
var valueFlags = map[string]bool{
	"endpoints": true, "cacert": true, "cert": true, "key": true,
	"cert-file": true, "key-file": true, "trusted-ca-file": true,
}

// refused are etcdctl commands whose result would land inside the member pod, not with the user.
func refused(args []string) error {
	var words []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			words = append(words, a)
		}
	}
	if len(words) >= 2 && words[0] == "snapshot" && words[1] == "save" {
		return fmt.Errorf("etcdctl snapshot save would write the snapshot into the member pod's filesystem (which has no shell or tar to copy it out), not onto this machine; backups are not part of this plugin yet")
	}
	return nil
}

// runEtcdctl runs the plan in the pod's etcd container.
func runEtcdctl(ctx context.Context, c *Clients, p *etcdctlPlan, stdin io.Reader, stdout, stderr io.Writer) error {
	return c.Exec(ctx, c.Namespace, p.Pod, etcdContainer, p.Command, stdin, stdout, stderr)
}
