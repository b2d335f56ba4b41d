//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
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
	labels := map[string]string{"app": name}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: labels,
		Ports: []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}},
	}}
	replicas, uid := int32(n), int64(65532)
	f, tr := false, true
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Spec: appsv1.StatefulSetSpec{
		ServiceName: name, Replicas: &replicas, PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
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
	for time.Since(start) < stepTimeout {
		if s.floorAnswers(name, n) {
			took := time.Since(start)
			// Gone before the measurement it is compared with starts: on two cores its pods would compete.
			_ = s.e.kube.AppsV1().StatefulSets(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{})
			for gone := time.Now(); time.Since(gone) < time.Minute; time.Sleep(500 * time.Millisecond) {
				if pods, err := s.e.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + name}); err == nil && len(pods.Items) == 0 {
					break
				}
			}
			return took
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("the floor's %d members did not all answer within %s", n, stepTimeout)
	return 0
}

// floorAnswers: each of the n pods answers Status on its own IP, all with one cluster ID and a leader.
func (s *scenario) floorAnswers(name string, n int) bool {
	pods, err := s.e.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil || len(pods.Items) != n {
		return false
	}
	cluster := uint64(0)
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
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
