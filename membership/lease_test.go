package membership

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

func TestStartIntent(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		problem   bool
	}{
		{"member", "member", false},
		{"leave", "leave", false},
		{"", "", false}, // no intent yet: the hook has not written the Lease
		{"Leave", "member", true},
		{"leave ", "member", true},
		{"memeber", "member", true},
		{"drain", "member", true}, // a value of a newer hook
	} {
		got, problem := StartIntent(tc.raw)
		require.Equal(t, tc.want, got, "%q", tc.raw)
		require.Equal(t, tc.problem, problem != "", "%q: %s", tc.raw, problem)
	}
}

// The join permission is two hand-editable timestamps: the agent uses only a window the hook could
// have written, and only while it lasts on the API server's clock.
func TestJoinPermission(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name      string
		permitted string // "-" leaves the annotation out
		deadline  string
		ok        bool
		problem   bool
	}{
		{"no permission", "-", "-", false, false},
		{"a permission the hook writes", at(-time.Minute), at(9 * time.Minute), true, false},
		{"expired", at(-20 * time.Minute), at(-10 * time.Minute), false, false},
		{"the hook's longest window", at(-time.Minute), at(24*time.Hour - time.Minute), true, false},
		{"deadline in 2099", at(-time.Minute), "2099-01-01T00:00:00Z", false, true},
		{"whole window in the future, far ahead", "2099-01-01T00:00:00Z", "2099-01-01T00:10:00Z", false, true},
		{"ends before it starts", at(time.Minute), at(-time.Minute), false, true},
		{"permitted does not parse", "yes", at(10 * time.Minute), false, true},
		{"deadline does not parse", at(-time.Minute), "tomorrow", false, true},
		{"deadline without permission", "-", at(10 * time.Minute), false, true},
		{"permission without deadline", at(-time.Minute), "-", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{api.AnnIntent: api.IntentMember}
			if tc.permitted != "-" {
				ann[api.AnnJoinPermitted] = tc.permitted
			}
			if tc.deadline != "-" {
				ann[api.AnnJoinDeadline] = tc.deadline
			}
			in := intentFromAnnotations(ann)
			ok, problem := in.Join.OpenAt(now)
			require.Equal(t, tc.ok, in.Permitted(now))
			require.Equal(t, tc.ok, ok)
			if problem != "" {
				in.Problems = append(in.Problems, problem)
			}
			require.Equal(t, tc.problem, len(in.Problems) > 0, "%v", in.Problems)
		})
	}
}

func TestIntentProblemsFromAnnotations(t *testing.T) {
	in := intentFromAnnotations(map[string]string{api.AnnIntent: "Leave"})
	require.Equal(t, "Leave", in.Intent, "the annotation as written")
	require.Len(t, in.Problems, 1)
	require.False(t, leaving(in), "only the exact intent leave removes a member")
	require.True(t, leaving(intentFromAnnotations(map[string]string{api.AnnIntent: "leave"})))
}

func TestLeaseClusterID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ids      []string
		want     uint64
		problems int
	}{
		{"none", nil, 0, 0},
		{"one", []string{"00000000000000c1"}, 0xc1, 0},
		{"the same twice (this Lease and another)", []string{"00000000000000c1", "c1"}, 0xc1, 0},
		{"a hand-edited value that sorts first is skipped", []string{"!bad", "00000000000000c1"}, 0xc1, 1},
		{"zero is not an ID", []string{"0000000000000000", "00000000000000c1"}, 0xc1, 1},
		{"only garbage", []string{"xyz"}, 0, 1},
		{"Leases disagree: the lowest, reported", []string{"00000000000000d2", "00000000000000c1"}, 0xc1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := LeaseClusterID(tc.ids)
			require.Equal(t, api.FormatID(tc.want), api.FormatID(got))
			require.Len(t, problems, tc.problems, "%v", problems)
		})
	}
}

func TestWithProblems(t *testing.T) {
	p := []string{`unknown intent "x"`}
	for _, tc := range []struct {
		in       string
		problems []string
		want     string
	}{
		{"", nil, ""},
		{"Promoting: not ready", nil, "Promoting: not ready"},
		{"", p, `LeaseProblem: unknown intent "x"`},
		// The reason word stays: the hook grants joins on WaitingForJoin.
		{"WaitingForJoin: no data", p, `WaitingForJoin: no data (unknown intent "x")`},
		{`WaitingForJoin: no data (unknown intent "x")`, p, `WaitingForJoin: no data (unknown intent "x")`},
	} {
		got := withProblems(tc.in, tc.problems)
		require.Equal(t, tc.want, got)
		require.Equal(t, (api.Report{Error: tc.in}).Reason() == "" && len(tc.problems) > 0,
			(api.Report{Error: got}).Reason() == "LeaseProblem")
	}
}

// An unchanged healthy voter's report is renewed every api.HealthyRenewSeconds, anything else every
// third of the Lease duration, and a change at once: every Lease write wakes the hook.
func TestReportRenewalCadence(t *testing.T) {
	leases := NewMemLeases()
	leases.SetIntent("c-0-member", api.IntentMember, false, 0)
	a := &Agent{Cfg: Self{ClusterUID: "uid", LeaseDuration: 30 * time.Second}, Store: leases.Store("c-0-member", "pod"), Log: slog.New(slog.DiscardHandler)}
	a.wire()
	healthy := api.Report{ClusterUID: "uid", Role: api.RoleLeader, Healthy: true, MemberID: "a"}
	learner := api.Report{ClusterUID: "uid", Role: api.RoleLearner, MemberID: "a"}
	for _, tc := range []struct {
		name   string
		last   api.Report
		next   api.Report
		ago    time.Duration
		writes bool
	}{
		{"healthy voter, unchanged, 2 min", healthy, healthy, 2 * time.Minute, false},
		{"healthy voter, unchanged, 3 min", healthy, healthy, 181 * time.Second, true},
		{"learner, unchanged, 9 s", learner, learner, 9 * time.Second, false},
		{"learner, unchanged, 11 s", learner, learner, 11 * time.Second, true},
		{"changed, 1 s", learner, healthy, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wrote := time.Now().Add(-tc.ago)
			a.rep.last, a.rep.wrote = tc.last, wrote
			a.rep.report(context.Background(), tc.next, false)
			require.Equal(t, tc.writes, a.rep.wrote != wrote)
		})
	}
}

// A renewal mark the hook could not have written asks for nothing, and says so.
func TestIntentRenewalMark(t *testing.T) {
	in := intentFromAnnotations(map[string]string{api.AnnIntent: api.IntentMember, api.AnnRenewal: api.RenewalMark("x")})
	require.Equal(t, api.RenewalMark("x"), in.Renewal)
	require.Empty(t, in.Problems)
	for _, bad := range []string{"now", "ABCDEF0123", "0123456789a"} {
		in := intentFromAnnotations(map[string]string{api.AnnIntent: api.IntentMember, api.AnnRenewal: bad})
		require.Empty(t, in.Renewal, bad)
		require.Len(t, in.Problems, 1, bad)
	}
}
