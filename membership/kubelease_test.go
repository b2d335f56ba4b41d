package membership

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/etcdhook/etcdhook/api"
)

// apiServer answers the Lease calls KubeLeases makes over real HTTP, and records each request as the
// RBAC verb and resource name the API server would authorise it as.
type apiServer struct {
	mu     sync.Mutex
	leases map[string]*coordv1.Lease
	asked  []string // "verb name"
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
	verb := map[string]string{"GET": "get", "PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}[r.Method]
	if name == "" && r.Method == "GET" {
		verb = "list"
		if r.URL.Query().Get("watch") != "" {
			verb = "watch"
		}
	}
	s.mu.Lock()
	s.asked = append(s.asked, verb+" "+name)
	l := s.leases[name]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !strings.HasPrefix(r.URL.Path, prefix) || l == nil {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
		return
	}
	_ = json.NewEncoder(w).Encode(l)
}

func (s *apiServer) verbs() (verbs, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seenV, seenN := map[string]bool{}, map[string]bool{}
	for _, a := range s.asked {
		v, n, _ := strings.Cut(a, " ")
		if !seenV[v] {
			seenV[v] = true
			verbs = append(verbs, v)
		}
		if !seenN[n] {
			seenN[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(verbs)
	return verbs, names
}

// The member Role (sync/render/rbac.go) must grant exactly what the agent calls: get and patch on the
// cluster's member Leases by name. It never updates, creates, lists or watches.
func TestKubeLeasesVerbs(t *testing.T) {
	n := api.Names{Cluster: "c", Namespace: "ns"}
	lease := func(i int, cid string) *coordv1.Lease {
		return &coordv1.Lease{
			TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: n.Lease(i), Namespace: "ns",
				OwnerReferences: []metav1.OwnerReference{{UID: types.UID("uid")}},
				Annotations: map[string]string{api.AnnIntent: api.IntentMember,
					api.AnnClusterUID: "uid", api.AnnClusterID: cid}},
		}
	}
	server := &apiServer{leases: map[string]*coordv1.Lease{n.Lease(0): lease(0, "00000000000000c1"), n.Lease(2): lease(2, "00000000000000c1")}}
	srv := httptest.NewServer(server)
	defer srv.Close()
	k, err := NewKubeLeases(&rest.Config{Host: srv.URL}, "ns", "c", n.Lease(0), "uid", "pod", 15*time.Second)
	require.NoError(t, err)
	ctx := t.Context()

	in, err := k.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, api.IntentMember, in.Intent)
	require.NoError(t, k.Write(ctx, api.Report{ClusterUID: "uid", Role: api.RoleVoter}))
	require.NoError(t, k.Write(ctx, api.Report{ClusterUID: "uid", Role: api.RoleLeader}))
	ids, err := k.ClusterIDs(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000c1"}, ids)

	// Peers: fresh Leases of this parent only.
	now := metav1.NewMicroTime(k.Now())
	old := metav1.NewMicroTime(k.Now().Add(-time.Hour))
	dur := int32(15)
	server.mu.Lock()
	server.leases[n.Lease(0)].Spec = coordv1.LeaseSpec{RenewTime: &now, LeaseDurationSeconds: &dur}
	server.leases[n.Lease(0)].Annotations[api.AnnMemberID] = "00000000000000a0"
	server.leases[n.Lease(2)].Spec = coordv1.LeaseSpec{RenewTime: &old, LeaseDurationSeconds: &dur}
	other := lease(3, "00000000000000c2")
	other.Annotations[api.AnnClusterUID] = "another-uid"
	other.Spec = coordv1.LeaseSpec{RenewTime: &now, LeaseDurationSeconds: &dur}
	server.leases[n.Lease(3)] = other
	server.mu.Unlock()
	peers, err := k.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, peers, 1, "the stale Lease and another parent's are not peers")
	require.Equal(t, "00000000000000a0", peers[0].MemberID)

	verbs, names := server.verbs()
	require.Equal(t, []string{"get", "patch"}, verbs)
	allowed := map[string]bool{}
	for i := 0; i < api.MaxSize; i++ {
		allowed[n.Lease(i)] = true
	}
	for _, name := range names {
		require.True(t, allowed[name], "Lease %q is outside the Role's resourceNames", name)
	}
}
