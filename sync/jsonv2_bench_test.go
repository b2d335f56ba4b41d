package sync

import (
	"bytes"
	"os"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// The first measurement of issue 25 item 5's gate: what github.com/go-json-experiment/json costs to decode
// the 9-member request, into Kubernetes' typed objects (an upper bound) and into small structs holding
// only what the decision reads (the shape the item asks for), beside BenchmarkPhases/decode (today's
// hand-written reader). docs/performance.md has the figures.

type v2Typed struct {
	Parent   api.EtcdCluster `json:"parent"`
	Children struct {
		ConfigMaps      map[string]*corev1.ConfigMap             `json:"ConfigMap.v1"`
		CronJobs        map[string]*batchv1.CronJob              `json:"CronJob.batch/v1"`
		Jobs            map[string]*batchv1.Job                  `json:"Job.batch/v1"`
		Leases          map[string]*coordv1.Lease                `json:"Lease.coordination.k8s.io/v1"`
		NetworkPolicies map[string]*networkingv1.NetworkPolicy   `json:"NetworkPolicy.networking.k8s.io/v1"`
		PDBs            map[string]*policyv1.PodDisruptionBudget `json:"PodDisruptionBudget.policy/v1"`
		Roles           map[string]*rbacv1.Role                  `json:"Role.rbac.authorization.k8s.io/v1"`
		RoleBindings    map[string]*rbacv1.RoleBinding           `json:"RoleBinding.rbac.authorization.k8s.io/v1"`
		Services        map[string]*corev1.Service               `json:"Service.v1"`
		ServiceAccounts map[string]*corev1.ServiceAccount        `json:"ServiceAccount.v1"`
		StatefulSets    map[string]*appsv1.StatefulSet           `json:"StatefulSet.apps/v1"`
	} `json:"children"`
	Related struct {
		PVCs map[string]*corev1.PersistentVolumeClaim `json:"PersistentVolumeClaim.v1"`
		Pods map[string]*corev1.Pod                   `json:"Pod.v1"`
	} `json:"related"`
}

type smallMeta struct {
	Name              string            `json:"name"`
	UID               string            `json:"uid"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	OwnerReferences   []struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		UID        string `json:"uid"`
		Controller *bool  `json:"controller"`
	} `json:"ownerReferences"`
}

type smallLease struct {
	Metadata smallMeta `json:"metadata"`
	Spec     struct {
		HolderIdentity       *string           `json:"holderIdentity"`
		RenewTime            *metav1.MicroTime `json:"renewTime"`
		LeaseDurationSeconds *int32            `json:"leaseDurationSeconds"`
	} `json:"spec"`
}

type smallPod struct {
	Metadata smallMeta `json:"metadata"`
	Status   struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type               string      `json:"type"`
			Status             string      `json:"status"`
			LastTransitionTime metav1.Time `json:"lastTransitionTime"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			Name         string `json:"name"`
			Image        string `json:"image"`
			RestartCount int32  `json:"restartCount"`
			Ready        bool   `json:"ready"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

type smallClaim struct {
	Metadata smallMeta `json:"metadata"`
	Spec     struct {
		Resources struct {
			Requests map[string]string `json:"requests"`
		} `json:"resources"`
	} `json:"spec"`
	Status struct {
		Capacity   map[string]string `json:"capacity"`
		Conditions []struct {
			Type string `json:"type"`
		} `json:"conditions"`
	} `json:"status"`
}

type smallObject struct {
	Metadata smallMeta `json:"metadata"`
}

type v2Small struct {
	Parent   api.EtcdCluster `json:"parent"`
	Children struct {
		ConfigMaps      map[string]*corev1.ConfigMap   `json:"ConfigMap.v1"`
		Leases          map[string]*smallLease         `json:"Lease.coordination.k8s.io/v1"`
		StatefulSets    map[string]*appsv1.StatefulSet `json:"StatefulSet.apps/v1"`
		Jobs            map[string]*batchv1.Job        `json:"Job.batch/v1"`
		Services        map[string]*smallObject        `json:"Service.v1"`
		ServiceAccounts map[string]*smallObject        `json:"ServiceAccount.v1"`
		Roles           map[string]*smallObject        `json:"Role.rbac.authorization.k8s.io/v1"`
		RoleBindings    map[string]*smallObject        `json:"RoleBinding.rbac.authorization.k8s.io/v1"`
		PDBs            map[string]*smallObject        `json:"PodDisruptionBudget.policy/v1"`
		NetworkPolicies map[string]*smallObject        `json:"NetworkPolicy.networking.k8s.io/v1"`
		CronJobs        map[string]*smallObject        `json:"CronJob.batch/v1"`
	} `json:"children"`
	Related struct {
		PVCs map[string]*smallClaim `json:"PersistentVolumeClaim.v1"`
		Pods map[string]*smallPod   `json:"Pod.v1"`
	} `json:"related"`
}

func BenchmarkJSONv2Decode(b *testing.B) {
	body, err := os.ReadFile("../hooks/testdata/bench/nine-members-scaling.request.json")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v v2Typed
			if err := jsonv2.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("small", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v v2Small
			if err := jsonv2.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
			if len(v.Children.Leases) != 9 || len(v.Related.Pods) != 9 {
				b.Fatal("decoded the wrong shape")
			}
		}
	})
}

// BenchmarkJSONv2Render: the render side of the same sync. The typed children are built once (objects),
// then written as the answer's children (childjson.go: go-json-experiment with encoding/json's rules, then
// a jsontext copy without nulls), and, for comparison, marshalled by the library alone (nulls kept).
func BenchmarkJSONv2Render(b *testing.B) {
	body, err := os.ReadFile("../hooks/testdata/bench/nine-members-scaling.request.json")
	if err != nil {
		b.Fatal(err)
	}
	cb, _, err := CheckBody(body)
	if err != nil {
		b.Fatal(err)
	}
	o, err := DecodeChecked(cb)
	if err != nil {
		b.Fatal(err)
	}
	p, err := decide(newFacts(o, fixtureNow), Options{Image: FixtureImage})
	if err != nil {
		b.Fatal(err)
	}
	objs := p.objects()
	b.Run("objects", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.objects()
		}
	})
	b.Run("children", func(b *testing.B) {
		b.ReportAllocs()
		w := writers.Get().(*childWriter)
		defer writers.Put(w)
		for b.Loop() {
			w.out.Reset()
			for _, obj := range objs {
				if _, err := w.appendChild(obj, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("marshal-only", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		enc := jsontext.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			enc.Reset(&buf, childOptions)
			for _, obj := range objs {
				if err := jsonv2.MarshalEncode(enc, obj); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
