//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"sort"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/writer"
	"github.com/etcdhook/etcdhook/membership"
)

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// clientEndpoint is the client Service, resolved by cluster DNS (the suite runs where it answers).
func (s *scenario) clientEndpoint() string { return s.names().ClientEndpoint() }

// podEndpoints are the client URLs of the member pods by IP.
func (s *scenario) podEndpoints() []string {
	var eps []string
	n := s.names()
	ec := s.cluster()
	// A user's certificate names the members' hosts, not their pod IPs (the built-in one has both).
	byName := ec.Spec.Security.TLS.Client.SecretName != ""
	for _, p := range s.pods() {
		// A pod above the size is no member (a leaver's pod the StatefulSet re-created for a moment before
		// its scale-down deleted it again: TestLeaveThenRestart's hashkv once asked one that was going).
		if ec.Spec.Size != nil && n.PodOrdinal(p.Name) >= int(*ec.Spec.Size) {
			continue
		}
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			if byName {
				eps = append(eps, n.ClientURL(n.PodOrdinal(p.Name)))
				continue
			}
			eps = append(eps, fmt.Sprintf("%s%s:%d", n.Scheme(), p.Status.PodIP, api.ClientPort))
		}
	}
	return eps
}

// newClient connects as a user would: with TLS, with the client certificate Secret the agents keep
// (NAME-client-tls), verifying the members against its ca.crt.
func (s *scenario) newClient(eps []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: 3 * time.Second, Logger: zap.NewNop()}
	if s.tlsOn() {
		name := s.clientSecretName()
		if _, err := s.secretData(name); err != nil {
			return nil, err
		}
		// A long-lived client reads the Secret at every handshake (membership.ReloadingClientTLS), as a
		// user's service reading its mounted Secret should: it then follows renewals and CA rotations.
		cfg.TLS = membership.ReloadingClientTLS(func() (map[string][]byte, error) { return s.secretData(name) })
	}
	return clientv3.New(cfg)
}

// clientSecretName is the client identity's Secret: the client-plane Secret the spec names or the
// built-in client Secret.
func (s *scenario) clientSecretName() string {
	ec := s.cluster()
	if user := ec.Spec.Security.TLS.Client.SecretName; user != "" {
		return user
	}
	if ec.Spec.Auth != nil {
		// Under spec.auth the shared client Secret is no etcd user: the checks read as root.
		return s.names().RootSecret()
	}
	return s.names().ClientSecret()
}

// secretData reads a Secret's data; safe off the test goroutine (no assertion).
func (s *scenario) secretData(name string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sec, err := s.e.kube.CoreV1().Secrets(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return sec.Data, nil
}

// clientTLS is the client identity: the client-plane Secret the spec names (the user's certificate,
// which has the client usage) or the built-in client Secret.
func (s *scenario) clientTLS() (*tls.Config, error) {
	name := s.names().ClientSecret()
	if user := s.cluster().Spec.Security.TLS.Client.SecretName; user != "" {
		name = user
	}
	sec, err := s.e.kube.CoreV1().Secrets(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return membership.ClientTLSFromFiles(sec.Data)
}

// startWriter writes through the client Service during a scenario (internal/writer: bounded in count
// and time, per-step failed writes and latency percentiles).
func (s *scenario) startWriter(first string) *swriter {
	cl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(s.t, err)
	w := &swriter{s: s, Writer: writer.Start(cl, writer.Limits{
		Prefix: "e2e/", Max: 60000, For: 30 * time.Minute, Every: 50 * time.Millisecond, Timeout: 2 * time.Second,
	}, first)}
	s.t.Cleanup(func() { w.Stop(); cl.Close() })
	// The disruption a scenario starts next must meet acknowledged writes: with none before it, the
	// check at Finish could not tell a restart that lost data from one that kept it.
	s.waitFor("the writer's first acknowledged writes", time.Minute, func() bool { return w.AckedInStep() >= minAcked })
	return w
}

// minAcked is how many acknowledged writes open a scenario and close it.
const minAcked = 5

type swriter struct {
	*writer.Writer
	s *scenario
}

// Finish waits for writes acknowledged once settled, stops the writer, checks every acknowledged key
// through the client Service and that every
// member's hashkv agrees at one revision, and records the figures.
func (w *swriter) Finish(extra string) {
	t := w.s.t
	// Clients must recover, not only members: a writer whose connection through the Service never
	// comes back after the last step would pass a status-only check.
	w.Step("settled")
	w.s.waitFor("acknowledged writes after the last step", time.Minute, func() bool { return w.AckedInStep() >= minAcked })
	w.s.withServiceClient(30*time.Second, func(ctx context.Context, cl *clientv3.Client) {
		w.s.checkHashKV(w.s.verify(ctx, cl, w.Writer))
	})
	results.add(t.Name(), extra+w.Table())
	t.Logf("\n%s%s", extra, w.Table())
}

// verifyWriter checks that every write w acknowledged is readable (through the client Service, with
// the scheme the cluster serves now).
func (s *scenario) verifyWriter(w *writer.Writer) {
	s.t.Helper()
	s.withServiceClient(30*time.Second, func(ctx context.Context, cl *clientv3.Client) { s.verify(ctx, cl, w) })
}

// verify stops w, checks that every write it acknowledged is readable through cl and returns the
// revision it read at.
func (s *scenario) verify(ctx context.Context, cl *clientv3.Client, w *writer.Writer) int64 {
	s.t.Helper()
	rev, acked, lost, err := w.Verify(ctx, cl)
	require.NoError(s.t, err)
	require.NotZero(s.t, acked)
	require.Zero(s.t, lost, "%d of %d acknowledged writes are not readable", lost, acked)
	return rev
}

// withServiceClient runs f with a client of the client Service and a context of timeout; a client that
// cannot be made fails the test.
func (s *scenario) withServiceClient(timeout time.Duration, f func(ctx context.Context, cl *clientv3.Client)) {
	s.t.Helper()
	cl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(s.t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	f(ctx, cl)
}

// checkHashKV asks every member for its KV hash at rev: all must agree.
func (s *scenario) checkHashKV(rev int64) {
	eps := s.podEndpoints()
	require.NotEmpty(s.t, eps)
	hashes := map[string]uint32{}
	for _, ep := range eps {
		cl, err := s.newClient([]string{ep})
		require.NoError(s.t, err)
		var h *clientv3.HashKVResponse
		for try := 0; try < 20; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h, err = cl.HashKV(ctx, ep, rev)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond) // a member may not have applied rev yet
		}
		cl.Close()
		require.NoError(s.t, err, "hashkv at %s", ep)
		hashes[ep] = h.Hash
	}
	var first uint32
	i := 0
	for _, h := range hashes {
		if i == 0 {
			first = h
		}
		require.Equal(s.t, first, h, "hashkv differs between members at revision %d: %v", rev, hashes)
		i++
	}
}

// memberList reads etcd's own member list through the client Service, asking again for half a minute:
// right after a status says settled, the Service may still send the call to a pod that is not serving
// yet, and one timed-out call is no answer.
func (s *scenario) memberList() []api.Member {
	s.t.Helper()
	resp := read(s, "etcd's member list", func() (*clientv3.MemberListResponse, error) {
		cl, err := s.newClient([]string{s.clientEndpoint()})
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.MemberList(ctx)
	})
	var out []api.Member
	for _, m := range resp.Members {
		em := api.Member{ID: api.FormatID(m.ID), Name: m.Name, Learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			em.PeerURL = m.PeerURLs[0]
		}
		out = append(out, em)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PeerURL < out[j].PeerURL })
	return out
}

func (s *scenario) memberIDs() map[int]string {
	out := map[int]string{}
	for _, m := range s.memberList() {
		out[s.names().PeerURLOrdinal(m.PeerURL)] = m.ID
	}
	return out
}
