//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/testsupport"
)

// The floor of creation (issue 26): a bare etcd StatefulSet of n members bootstrapped statically
// (--initial-cluster naming every member, parallel pod management, no agent, no hook), on the image,
// storage class, claim size and pod security the hook's members get. Its time from apply to every member
// answering with one leader is what no operator can beat on this machine; TestCreate reports its own
// figures as ratios to it, measured in the same run.
func (s *scenario) createFloor(n int) time.Duration {
	s.t.Helper()
	const name = "floor"
	host := func(i int) string { return fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", name, i, name, s.ns) }
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("%s-%d=http://%s:2380", name, i, host(i)))
	}
	labels := map[string]string{"app": name, floorMember: "true"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{floorMember: "true"},
		Ports: []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}},
	}}
	replicas, uid := int32(n), int64(65532)
	f, tr := false, true
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Spec: appsv1.StatefulSetSpec{
		ServiceName: name, Replicas: &replicas, PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &tr, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "etcd", Image: api.DefaultRepository + ":v" + strings.TrimPrefix(*etcdVersion, "v"),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{api.EtcdBinary},
				Env:             []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Args: []string{
					"--name=$(POD)", "--data-dir=/var/lib/etcd/data",
					"--listen-client-urls=http://0.0.0.0:2379", "--listen-peer-urls=http://0.0.0.0:2380",
					fmt.Sprintf("--advertise-client-urls=http://$(POD).%s.%s.svc.cluster.local:2379", name, s.ns),
					fmt.Sprintf("--initial-advertise-peer-urls=http://$(POD).%s.%s.svc.cluster.local:2380", name, s.ns),
					"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
					"--initial-cluster-token=" + s.ns,
				},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &tr, RunAsNonRoot: &tr,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
			}},
		}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}},
	}}
	start := time.Now()
	_, err := s.e.kube.CoreV1().Services(s.ns).Create(s.ctx, svc, metav1.CreateOptions{})
	if err == nil {
		_, err = s.e.kube.AppsV1().StatefulSets(s.ns).Create(s.ctx, sts, metav1.CreateOptions{})
	}
	if err != nil {
		s.t.Fatalf("creating the floor's StatefulSet: %v", err)
	}
	s.waitForFloor(fmt.Sprintf("the floor's %d members to answer", n), n, "")
	return time.Since(start)
}

// floorMember labels the floor's member pods: the StatefulSet's and the one added by floorAddMember.
const floorMember = "floor-member"

// floorPodDeleted deletes pod floor-i of an n-member floor and times it until a new pod answers with the
// others: the pod's own stop and start, the floor of the hook's pod-delete figure.
func (s *scenario) floorPodDeleted(n, i int) time.Duration {
	s.t.Helper()
	name := fmt.Sprintf("floor-%d", i)
	old, err := s.e.kube.CoreV1().Pods(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("reading pod %s: %v", name, err)
	}
	start := time.Now()
	if err := s.e.kube.CoreV1().Pods(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{}); err != nil {
		s.t.Fatalf("deleting pod %s: %v", name, err)
	}
	s.waitForFloor("pod "+name+" back", n, string(old.UID))
	return time.Since(start)
}

// floorAddMember adds member n to an n-member floor as etcd's documentation does (member add, then one
// pod started with the new member list and --initial-cluster-state=existing, on a claim of the same
// class and size) and times it until every member answers: the floor of the hook's scale +1 figure.
func (s *scenario) floorAddMember(n int) time.Duration {
	s.t.Helper()
	sts, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, "floor", metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("reading the floor: %v", err)
	}
	pods, err := s.e.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: floorMember + "=true"})
	if err != nil || len(pods.Items) == 0 {
		s.t.Fatalf("listing the floor's pods: %v", err)
	}
	name := fmt.Sprintf("floor-%d", n)
	peer := fmt.Sprintf("http://%s.floor.%s.svc.cluster.local:2380", name, s.ns)
	spec := sts.Spec.Template.Spec.DeepCopy()
	spec.Hostname, spec.Subdomain = name, "floor"
	c := &spec.Containers[0]
	for k, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--initial-cluster="):
			c.Args[k] = a + "," + name + "=" + peer
		case a == "--initial-cluster-state=new":
			c.Args[k] = "--initial-cluster-state=existing"
		}
	}
	spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
	claim := sts.Spec.VolumeClaimTemplates[0].DeepCopy()
	claim.Name, claim.Namespace = "data-"+name, s.ns
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: map[string]string{floorMember: "true"}}, Spec: *spec}
	// etcd refuses a member add within 5 s of a member's start (its strict reconfiguration check): the
	// cluster the hook grows has been up for longer, so the floor's is too before the clock starts.
	time.Sleep(6 * time.Second)
	var start time.Time
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + pods.Items[0].Status.PodIP + ":2379"}, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		// A floor member still catching up on two loaded cores makes etcd refuse the add ("unhealthy
		// cluster"): asked again, and the clock starts at the attempt that is accepted, so that waiting
		// for the floor's own health never counts in the floor.
		for attempt := 0; ; attempt++ {
			start = time.Now()
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			_, err = cl.MemberAdd(ctx, []string{peer})
			cancel()
			if err == nil || !errors.Is(err, rpctypes.ErrUnhealthy) || attempt == 30 {
				break
			}
			time.Sleep(time.Second)
		}
		cl.Close()
	}
	if err == nil {
		_, err = s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).Create(s.ctx, claim, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = s.e.kube.CoreV1().Pods(s.ns).Create(s.ctx, pod, metav1.CreateOptions{})
	}
	if err != nil {
		s.t.Fatalf("adding member %s to the floor: %v", name, err)
	}
	s.waitForFloor("member "+name+" to answer", n+1, "")
	return time.Since(start)
}

// removeFloor deletes the floor and waits for its pods to be gone: on two cores they would compete
// with the measurement the floor is compared with.
func (s *scenario) removeFloor() {
	_ = s.e.kube.AppsV1().StatefulSets(s.ns).Delete(s.ctx, "floor", metav1.DeleteOptions{})
	_ = s.e.kube.CoreV1().Pods(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: floorMember + "=true"})
	testsupport.Poll(time.Minute, 500*time.Millisecond, func() bool {
		pods, err := s.e.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: floorMember + "=true"})
		return err == nil && len(pods.Items) == 0
	})
}

func (s *scenario) waitForFloor(what string, n int, notUID string) {
	s.t.Helper()
	if _, ok := testsupport.Poll(stepTimeout, 100*time.Millisecond, func() bool { return s.floorAnswers(n, notUID) }); !ok {
		s.t.Fatalf("timed out after %s waiting for %s", stepTimeout, what)
	}
}

// floorAnswers: each of the n member pods (none of them the pod notUID) answers Status on its own IP,
// all with one cluster ID and a leader.
func (s *scenario) floorAnswers(n int, notUID string) bool {
	pods, err := s.e.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: floorMember + "=true"})
	if err != nil || len(pods.Items) != n {
		return false
	}
	cluster := uint64(0)
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || string(p.UID) == notUID || p.DeletionTimestamp != nil {
			return false
		}
		ep := "http://" + p.Status.PodIP + ":2379"
		cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cl.Status(ctx, ep)
		cancel()
		cl.Close()
		if err != nil || st.Leader == 0 || (cluster != 0 && st.Header.ClusterId != cluster) {
			return false
		}
		cluster = st.Header.ClusterId
	}
	return true
}
