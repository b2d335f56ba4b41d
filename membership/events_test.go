package membership

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdhook/etcdhook/api"
)

// rejoined: slot i is a healthy voter under an ID other than old, and its own report says so (written
// after the promotion, so after its event). tryMemberID is "" when the list cannot be read: not an answer.
func (c *tcluster) rejoined(i int, old string) bool {
	id := c.tryMemberID(i)
	return id != "" && id != old && c.voters(0, 1, 2) && c.leases.Report(c.slots[i].lease).MemberID == id
}

// notes returns the notes of the events with reason, in order.
func notes(r *MemRecorder, reason string) []string {
	var n []string
	for _, e := range r.Events() {
		if e.Reason == reason {
			n = append(n, e.Note)
		}
	}
	return n
}

// The story of one member in events, against real etcd (one version: the events come from the agent's
// own steps, which do not differ by version): bootstrap, join and promote; data loss and its
// replacement; removed by a Job, its data moved aside and the rejoin; leave. Each thing is posted once,
// however many looks it took.
func TestEventsMembership(t *testing.T) {
	v := newestEtcd
	c := newCluster(t, v, 3) // three: a data loss must leave a quorum to replace the member
	c.events = &MemRecorder{}
	c.bootstrap(nil, 3)
	ev := c.events
	require.Equal(t, 1, ev.Count(EventClusterBootstrapped))
	require.Equal(t, 1, ev.Count(EventCACreated), "one CA, however many agents raced for it")
	require.GreaterOrEqual(t, ev.Count(EventCertificateIssued), 4, "member certificates of m0-m2, the client certificate")
	require.Equal(t, 2, ev.Count(EventMemberAdded))
	require.Equal(t, 2, ev.Count(EventMemberPromoted))
	first := c.memberID(1)
	require.Contains(t, notes(ev, EventMemberAdded)[0], "pod m1: added as learner "+first)
	require.Contains(t, notes(ev, EventMemberPromoted)[0], "pod m1: learner "+first+" promoted")

	// Data loss: the replaced ID is named once, the new member is added and promoted.
	c.kill(1)
	c.wipe(1)
	// The hook permits the replacement (grow dropped the permission once m1 was a voter); it lasts
	// through the rejoin after the removal below.
	c.intent(1, api.IntentMember, false, permit)
	c.start(1, 0)
	c.waitFor("m1 replaced", stepMax, func() bool { return c.rejoined(1, first) })
	second := c.memberID(1)
	require.Equal(t, []string{"pod m1: member " + first + " is in the member list but its data directory is empty: removing that ID and joining under a new one"},
		notes(ev, EventDataLossDetected))
	require.Equal(t, 3, ev.Count(EventMemberAdded))
	require.Contains(t, notes(ev, EventMemberAdded)[2], "replacing member "+first)
	require.Equal(t, 3, ev.Count(EventMemberPromoted))

	// Removed by a Job while running: the Job says so; the agent moves the data aside and rejoins.
	job := &MemRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Run again until it succeeds, as the hook runs a failed Job again: a health read that timed out on
	// a loaded machine refuses (safely). Only a success records an event, so the count below holds.
	removeByJob := func(req RemoveRequest) {
		c.untilDone("the remove Job for "+req.ID, func() error { return RemoveMember(ctx, c.etcd(2*time.Second), c.log, req) })
	}
	removeByJob(RemoveRequest{ID: second, PeerURL: c.slots[1].peerURL, Reason: "leave", Endpoints: c.endpoints(-1), Events: job})
	require.Len(t, job.Events(), 1)
	require.Equal(t, RecordedEvent{Reason: EventMemberRemoved, Action: "RemoveMember",
		Note: "member " + second + " (m1, peer " + c.slots[1].peerURL + ") removed by Job: reason leave"}, job.Events()[0])
	c.waitFor("m1 back", stepMax, func() bool { return c.rejoined(1, second) })
	require.Len(t, notes(ev, EventDataMovedAside), 1)
	require.Contains(t, notes(ev, EventDataMovedAside)[0], "member "+second+" is not in the member list")
	require.Equal(t, 4, ev.Count(EventMemberAdded))

	// A second remove of the same member is not news.
	removeByJob(RemoveRequest{ID: second, Reason: "leave", Endpoints: c.endpoints(-1), Events: job})
	require.Len(t, job.Events(), 1)

	// Leave.
	third := c.memberID(1)
	c.intent(1, api.IntentLeave, false, 0)
	c.waitFor("m1 parked", stepMax, func() bool { return c.leases.Report(c.slots[1].lease).Role == api.RoleLeft })
	require.Equal(t, []string{"pod m1: member " + third + " removed itself from the cluster (intent leave); parked without etcd"}, notes(ev, EventMemberLeft))

	require.Equal(t, 1, ev.Count(EventClusterBootstrapped), "nothing posted again by looking again")
	require.Zero(t, ev.Count(EventCrashLoop))
	require.Zero(t, ev.Count(EventCertificatesInvalid))
	for _, e := range ev.Events() {
		require.False(t, e.Warning && e.Reason != EventDataLossDetected, "only the data loss is a warning here: %v", e)
	}
}

// Certificates: made once, renewed when due (member and client), nothing while nothing changes.
func TestEventsCertificates(t *testing.T) {
	rec := &MemRecorder{}
	now := time.Now()
	c := &Certs{Store: NewMemSecrets(), CASecret: "e-ca", ClientSecret: "e-client-tls", CADuration: 24 * time.Hour, CertDuration: 3 * time.Hour,
		PeerDir: t.TempDir(), ClientDir: t.TempDir(), CommonName: "e-0", DNSNames: []string{"localhost"},
		Now: func() time.Time { return now }, Events: rec}
	_, err := c.Ensure(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{EventCACreated, EventCertificateIssued, EventCertificateIssued}, rec.Reasons())
	require.Contains(t, rec.Events()[0].Note, "pod e-0: created the cluster CA in Secret e-ca")
	require.Equal(t, "IssueClientCertificate", rec.Events()[1].Action)
	require.Equal(t, "IssueMemberCertificate", rec.Events()[2].Action)

	_, err = c.Ensure(context.Background())
	require.NoError(t, err)
	require.Len(t, rec.Events(), 3, "nothing due: nothing posted")

	now = now.Add(2*time.Hour + time.Minute)
	_, err = c.Ensure(context.Background())
	require.NoError(t, err)
	got := rec.Events()[3:]
	require.Len(t, got, 2)
	require.Equal(t, RecordedEvent{Reason: EventCertificateRenewed, Action: "RenewClientCertificate", Note: got[0].Note}, got[0])
	require.Contains(t, got[0].Note, "pod e-0: renewed the client certificate in Secret e-client-tls")
	require.Equal(t, EventCertificateRenewed, got[1].Reason)
	require.Equal(t, "RenewMemberCertificate", got[1].Action)
}

// A mounted Secret that is refused is one warning when it appears, not one per look; a different
// problem is posted again.
func TestEventsCertificatesInvalid(t *testing.T) {
	src := t.TempDir()
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		require.NoError(t, os.WriteFile(filepath.Join(src, k), []byte("garbage"), 0o600))
	}
	rec := &MemRecorder{}
	a := &Agent{
		Cfg:    Self{Name: "e-1", Tick: time.Nanosecond, CertLook: time.Nanosecond},
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Events: rec,
		Certs: &Certs{PeerSource: src, ClientSource: src, PeerDir: t.TempDir(), ClientDir: t.TempDir(),
			PeerNames: []string{"localhost"}, ClientNames: []string{"localhost"}},
	}
	a.wire()
	for i := 0; i < 3; i++ {
		require.Error(t, a.tls.refresh(context.Background()))
		time.Sleep(time.Millisecond)
	}
	require.Len(t, rec.Events(), 1)
	e := rec.Events()[0]
	require.True(t, e.Warning)
	require.Equal(t, EventCertificatesInvalid, e.Reason)
	require.True(t, strings.HasPrefix(e.Note, "pod e-1: peer plane: "), e.Note)
	require.Contains(t, e.Note, "etcd waits for usable files")

	require.NoError(t, os.Remove(filepath.Join(src, "tls.key")))
	require.Error(t, a.tls.refresh(context.Background()))
	require.Len(t, rec.Events(), 2, "another problem is news")
}

// The client-go recorder posts on the EtcdCluster (what kubectl describe selects on: kind, name,
// namespace, UID), through events.k8s.io/v1, folds a repeat into a series, and is bounded.
func TestEventsKubeRecorder(t *testing.T) {
	client := fake.NewSimpleClientset()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := NewKubeRecorder(client, "ns1", "c1", "uid-1", "etcdhook-agent", log)
	defer r.Close()
	r.Event(EventMemberAdded, "AddLearner", "pod c1-1: added as learner 1234", false)
	r.Flush(5 * time.Second)
	l, err := client.EventsV1().Events("ns1").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	e := l.Items[0]
	require.Equal(t, api.APIVersion, e.Regarding.APIVersion)
	require.Equal(t, "EtcdCluster", e.Regarding.Kind)
	require.Equal(t, "c1", e.Regarding.Name)
	require.Equal(t, "ns1", e.Regarding.Namespace)
	require.Equal(t, "uid-1", string(e.Regarding.UID))
	require.Equal(t, "ns1", e.Namespace)
	require.Equal(t, "MemberAdded", e.Reason)
	require.Equal(t, "AddLearner", e.Action)
	require.Equal(t, "Normal", e.Type)
	require.Equal(t, "pod c1-1: added as learner 1234", e.Note)
	require.Equal(t, "etcdhook-agent", e.ReportingController)
	require.NotEmpty(t, e.ReportingInstance)
	require.False(t, e.EventTime.IsZero())

	// A repeat (same reason and action) patches the first into a series instead of a second Event.
	r.Event(EventMemberAdded, "AddLearner", "pod c1-1: added as learner 5678", false)
	r.Flush(5 * time.Second)
	l, err = client.EventsV1().Events("ns1").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	require.NotNil(t, l.Items[0].Series)
	require.EqualValues(t, 2, l.Items[0].Series.Count)

	// A flood (distinct actions, so nothing folds) is cut at the burst.
	r.Event(EventCrashLoop, "Warn-0", "x", true)
	for i := 1; i < 3*eventBurst; i++ {
		r.Event(EventCrashLoop, "Warn-"+itoa(i%10)+itoa(i/10), "x", true)
	}
	r.Flush(5 * time.Second)
	l, err = client.EventsV1().Events("ns1").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.LessOrEqual(t, len(l.Items), eventBurst+1)
	require.Greater(t, len(l.Items), 2)
	warnings := 0
	for _, e := range l.Items {
		if e.Type == "Warning" {
			warnings++
		}
	}
	require.Equal(t, len(l.Items)-1, warnings)
}
