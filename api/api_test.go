package api

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNamesAndOrdinals(t *testing.T) {
	n := Names{Cluster: "demo", Namespace: "prod"}
	require.Equal(t, "http://demo-2.demo-peer.prod.svc:2380", n.PeerURL(2))
	require.Equal(t, 2, n.PeerURLOrdinal("http://demo-2.demo-peer.prod.svc:2380"))
	require.Equal(t, -1, n.PeerURLOrdinal("http://demo-2.other.prod.svc:2380"))
	require.Equal(t, -1, n.PeerURLOrdinal("http://demo-02.demo-peer.prod.svc:2380"))
	require.Equal(t, -1, n.PeerURLOrdinal("http://demox-2.demo-peer.prod.svc:2380"))
	require.Equal(t, 3, n.LeaseOrdinal("demo-3-member"))
	require.Equal(t, -1, n.LeaseOrdinal("demo-x-member"))
	require.Equal(t, 4, n.PVCOrdinal("data-demo-4"))
	require.Equal(t, "demo-rm-00000000000000ff-2", n.RemoveJob(FormatID(255), 2))
	require.LessOrEqual(t, len(Names{Cluster: "abcdefghij-abcdefghij-abcdefghij-abcdefg"}.RemoveJob(FormatID(1<<63), 99)), 63)
}

func TestReportRoundTrip(t *testing.T) {
	r := Report{MemberID: "a", ClusterID: "b", ClusterUID: "u", Role: RoleLeader, Healthy: true, Version: "3.6.16", LeaderID: "a",
		DBSize: 25 << 20, DBSizeInUse: 9 << 20, Alarms: []string{"NOSPACE@a", "NOSPACE@b"},
		Members: []Member{{ID: "b", PeerURL: "p2", Started: true}, {ID: "a", PeerURL: "p1", Started: true, Learner: true}}}
	got, err := ParseReport(r.Annotations())
	require.NoError(t, err)
	require.Equal(t, "a", got.Members[0].ID, "members are sorted by ID")
	got.Members = r.Members
	require.Equal(t, r, got)
	_, err = ParseReport(map[string]string{AnnMembers: "{broken"})
	require.Error(t, err)
	empty, err := ParseReport(map[string]string{})
	require.NoError(t, err)
	require.Nil(t, empty.Members, "no list is not an empty list")
	require.Nil(t, empty.Alarms)
	// A hand-edited size is unknown, never a number the quota warning would act on.
	for _, bad := range []string{"-5", "12MB", "1e9", " "} {
		got, err := ParseReport(map[string]string{AnnDBSize: bad, AnnDBSizeInUse: bad})
		require.NoError(t, err)
		require.Zero(t, got.DBSize, bad)
		require.Zero(t, got.DBSizeInUse, bad)
	}
	require.Equal(t, "", Report{}.Annotations()[AnnDBSize], "an unknown size clears the annotation")
}

func TestSizeMoved(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		reported, now int64
		moved         bool
	}{
		{0, 0, false},
		{0, 20 << 10, true},              // first size known
		{20 << 10, 0, true},              // size no longer known
		{20 << 10, 900 << 10, false},     // small database: under 1 MiB of change is never written
		{20 << 10, 20<<10 + mib, true},   // 1 MiB on a small one
		{100 * mib, 103 * mib, false},    // 3% of 100 MiB is below 1/32
		{100 * mib, 104 * mib, true},     // 4 MiB >= 104/32 MiB
		{1 << 30, 1<<30 - 30*mib, false}, // shrinking by less than 1/32
		{1 << 30, 1<<30 - 40*mib, true},  // a defragmentation shows
		{2 << 30, 2<<30 + 65*mib, false}, // 1/32 of the larger: 65 MiB of 2 GiB + 65 MiB is not enough
		{2 << 30, 2<<30 + 67*mib, true},
	} {
		require.Equal(t, tc.moved, SizeMoved(tc.reported, tc.now), "%d -> %d", tc.reported, tc.now)
		require.Equal(t, tc.moved, SizeMoved(tc.now, tc.reported), "symmetric: %d -> %d", tc.now, tc.reported)
	}
}

func TestQuotaBackendBytes(t *testing.T) {
	for _, tc := range []struct {
		options map[string]string
		quota   int64
		ok      bool
	}{
		{nil, DefaultQuotaBackendBytes, true},
		{map[string]string{"quota-backend-bytes": "0"}, DefaultQuotaBackendBytes, true},
		{map[string]string{"quota-backend-bytes": "8589934592"}, 8 << 30, true},
		{map[string]string{"quota-backend-bytes": "-1"}, 0, true}, // etcd: quota disabled
		{map[string]string{"quota-backend-bytes": "8Gi"}, 0, false},
		{map[string]string{"quota-backend-bytes": ""}, 0, false},
	} {
		q, ok := QuotaBackendBytes(tc.options)
		require.Equal(t, tc.ok, ok, "%v", tc.options)
		require.Equal(t, tc.quota, q, "%v", tc.options)
	}
}

// Defaulted fills every field the CRD defaults and leaves the caller's spec untouched (DeepCopy), so a
// decision can never write a default back into the parent it was sent.
func TestDefaultedCopiesAndFills(t *testing.T) {
	in := ClusterSpec{Storage: StorageSpec{StorageClassName: ptrTo("fast")}}
	out := Defaulted(in)
	require.Equal(t, int32(DefaultSize), *out.Size)
	require.Equal(t, DefaultVersion, out.Version)
	require.Equal(t, DefaultRepository, out.Repository)
	require.Equal(t, resource.MustParse(DefaultStorageSize), *out.Storage.Size)
	require.Equal(t, int32(DefaultDeadMemberSeconds), *out.Timeouts.DeadMemberSeconds)
	require.Nil(t, in.Size, "the input is not modified")
	*out.Storage.StorageClassName = "slow"
	require.Equal(t, "fast", *in.Storage.StorageClassName, "pointers are copied, not shared")

	throwaway := Defaulted(ClusterSpec{Storage: StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	require.Nil(t, throwaway.Storage.Size, "an emptyDir cluster gets no volume size")
}

func ptrTo[T any](v T) *T { return &v }

// The join window is read the same way by the hook (counting a member as joining) and by the agent
// (starting a join): these are the cases where a hand edit or a bug could make them disagree.
func TestJoinWindow(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name               string
		permitted, until   string
		open               bool
		parseProblem, late bool
	}{
		{"absent", "", "", false, false, false},
		{"a window the hook writes", at(-time.Minute), at(9 * time.Minute), true, false, false},
		{"expired", at(-20 * time.Minute), at(-10 * time.Minute), false, false, false},
		{"the deadline itself is closed", at(-10 * time.Minute), at(0), false, false, false},
		{"the longest window", at(-time.Minute), at(24*time.Hour - time.Minute), true, false, false},
		{"longer than any the hook writes", at(-time.Minute), at(25 * time.Hour), false, true, false},
		{"moved far into the future", "2099-01-01T00:00:00Z", "2099-01-01T00:10:00Z", false, false, true},
		{"ends before it starts", at(time.Minute), at(-time.Minute), false, true, false},
		{"permitted does not parse", "yes", at(10 * time.Minute), false, true, false},
		{"deadline without permission", "", at(10 * time.Minute), false, true, false},
		{"permission without deadline", at(-time.Minute), "", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, problem := ParseJoinWindow(tc.permitted, tc.until)
			require.Equal(t, tc.parseProblem, problem != "", problem)
			if problem != "" {
				require.True(t, w.IsZero(), "an unusable window is no window")
			}
			open, late := w.OpenAt(now)
			require.Equal(t, tc.open, open)
			require.Equal(t, tc.late, late != "", late)
		})
	}
	w := NewJoinWindow(now, 10*time.Minute)
	p, d := w.Annotations()
	back, problem := ParseJoinWindow(p, d)
	require.Empty(t, problem)
	require.Equal(t, w, back)
}

// Compaction set through options before spec.maintenance existed is taken as the spec's compaction, so
// the new default never contradicts it; a spec that sets both keeps the options (refused as managed).
func TestDefaultedCompaction(t *testing.T) {
	s := Defaulted(ClusterSpec{})
	require.Equal(t, CompactionSpec{Mode: "periodic", Retention: "1h"}, s.Maintenance.Compaction)

	legacy := ClusterSpec{Options: map[string]string{"auto-compaction-retention": "6h", "snapshot-count": "5000"}}
	s = Defaulted(legacy)
	require.Equal(t, CompactionSpec{Mode: "periodic", Retention: "6h"}, s.Maintenance.Compaction)
	require.Equal(t, map[string]string{"snapshot-count": "5000"}, s.Options)
	require.Contains(t, legacy.Options, "auto-compaction-retention", "the input is not changed")

	s = Defaulted(ClusterSpec{Options: map[string]string{"auto-compaction-mode": "revision"}})
	require.Equal(t, CompactionSpec{Mode: "revision", Retention: "10000"}, s.Maintenance.Compaction)
	require.Nil(t, s.Options)

	both := ClusterSpec{Maintenance: MaintenanceSpec{Compaction: CompactionSpec{Retention: "2h"}}, Options: map[string]string{"auto-compaction-retention": "6h"}}
	s = Defaulted(both)
	require.Equal(t, "2h", s.Maintenance.Compaction.Retention)
	require.Equal(t, "6h", s.Options["auto-compaction-retention"])
}

func TestOverQuota(t *testing.T) {
	const q = 16 << 20 // 1/16 is 1 MiB
	for _, tc := range []struct {
		size, quota int64
		over        bool
	}{
		{0, q, false},             // unknown size
		{15<<20 - 1, q, false},    // just below the line
		{15 << 20, q, true},       // the line
		{q + 4096, q, true},       // past the quota (a file grows past it by the write that raised NOSPACE)
		{1 << 40, 0, false},       // no quota
		{3 << 20, 2 << 30, false}, // etcd's default quota, a small file
	} {
		require.Equal(t, tc.over, OverQuota(tc.size, tc.quota), "size %d quota %d", tc.size, tc.quota)
	}
}

// A report's reason is its typed annotation when the agent wrote one, else (an agent from before it)
// the leading word of its error; a hand-edited reason that is not a reason's word is ignored.
func TestReportReason(t *testing.T) {
	var r Report
	r.SetError(ReasonDefragmenting, "etcdserver: request timed out: retried in 1m")
	back, err := ParseReport(r.Annotations())
	require.NoError(t, err)
	require.Equal(t, ReasonDefragmenting, back.ErrorReason)
	require.Equal(t, ReasonDefragmenting, back.Reason())
	require.Equal(t, "Defragmenting: etcdserver: request timed out: retried in 1m", back.Error)

	old := Report{Error: "Unhealthy: context deadline exceeded"}
	require.Equal(t, ReasonUnhealthy, old.Reason(), "an older agent's report: the leading word")

	for _, bad := range []string{"defragmenting", "Defrag ment", "Défrag", strings.Repeat("A", 65), "Parked: x"} {
		ann := r.Annotations()
		ann[AnnErrorReason] = bad
		got, err := ParseReport(ann)
		require.NoError(t, err)
		require.Empty(t, got.ErrorReason, bad)
		require.Equal(t, ReasonDefragmenting, got.Reason(), "%q falls back to the error's word", bad)
	}
	require.Empty(t, (&Report{ErrorReason: ReasonParked}).Reason(), "no error, no reason")
}
