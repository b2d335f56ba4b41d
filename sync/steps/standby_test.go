package steps

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/standby"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The standby's step: following (fenced, the applier at one replica, the conditions from its report);
// a promote token stops the applier first and records the promotion only once no applier pod is left;
// a recorded promotion lifts the fence, renders no applier, and a later token changes nothing.
func TestStandby(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	n := api.Names{Namespace: "dr", Cluster: "main"}
	spec := api.ClusterSpec{Standby: &api.StandbySpec{From: "s3://b/p/prod/main/latest"}}
	report := func(lag time.Duration, age time.Duration, stop *api.StandbyStop) *coordv1.Lease {
		r := api.StandbyReport{Revision: 90, Newest: 100, LagSeconds: lag.Seconds(), ReportTime: now.Add(-age), Stop: stop}
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.BackupName(), Annotations: map[string]string{api.AnnStandbyReport: r.String()}}}
	}
	applier := func(replicas, running int32, created time.Time) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: n.StandbyApplier(), Generation: 2, CreationTimestamp: metav1.Time{Time: created}},
			Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
			Status:     appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: running},
		}
	}
	recorded := &api.StandbyPromoted{Token: "t1", Revision: 90, Time: metav1.Time{Time: now.Add(-time.Hour)}, PrimaryNewestRevision: 100}
	for _, tc := range []struct {
		name         string
		token        string
		lease        *coordv1.Lease
		sts          *appsv1.StatefulSet
		promoted     *api.StandbyPromoted
		notFormed    bool
		wantApplier  bool
		wantReplicas int32
		wantFence    bool
		wantRecord   bool
		wantWaiting  bool
		lagging      string
		stopped      string
	}{
		{name: "following", lease: report(time.Second, time.Second, nil), sts: applier(1, 1, now.Add(-time.Hour)), wantApplier: true, wantReplicas: 1, wantFence: true},
		{name: "lagging", lease: report(5*time.Minute, time.Second, nil), sts: applier(1, 1, now.Add(-time.Hour)), wantApplier: true, wantReplicas: 1, wantFence: true, lagging: "behind the primary's newest revision 100"},
		{name: "silent", lease: report(0, 10*time.Minute, nil), sts: applier(1, 1, now.Add(-time.Hour)), wantApplier: true, wantReplicas: 1, wantFence: true, lagging: "last reported"},
		{name: "no report from an old applier", sts: applier(1, 1, now.Add(-time.Hour)), wantApplier: true, wantReplicas: 1, wantFence: true, lagging: "has not reported"},
		{name: "no report from a new applier", sts: applier(1, 1, now.Add(-time.Second)), wantApplier: true, wantReplicas: 1, wantFence: true},
		{name: "stopped", lease: report(0, time.Second, &api.StandbyStop{Reason: "Gap", Object: "prod/main/20250101T000000Z-r95/", Revision: 90}), sts: applier(1, 1, now.Add(-time.Hour)),
			wantApplier: true, wantReplicas: 1, wantFence: true, stopped: "prod/main/20250101T000000Z-r95/"},
		{name: "promote asked: the applier is scaled to 0 first", token: "t1", lease: report(0, time.Second, nil), sts: applier(1, 1, now.Add(-time.Hour)),
			wantApplier: true, wantReplicas: 0, wantFence: true, wantWaiting: true},
		{name: "promote asked: a pod still terminates", token: "t1", lease: report(0, time.Second, nil), sts: applier(0, 1, now.Add(-time.Hour)),
			wantApplier: true, wantReplicas: 0, wantFence: true, wantWaiting: true},
		{name: "promote asked before the seed restored", token: "t1", notFormed: true, wantApplier: true, wantReplicas: 0, wantFence: true, wantWaiting: true},
		{name: "promote: no applier pod left, recorded, the applier released", token: "t1", lease: report(0, time.Second, nil), sts: applier(0, 0, now.Add(-time.Hour)),
			wantRecord: true},
		{name: "promoted", token: "t1", lease: report(0, time.Second, nil), promoted: recorded},
		{name: "a second promote is a no-op", token: "t2", lease: report(0, time.Second, nil), promoted: recorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &wire.Observed{Leases: map[string]*coordv1.Lease{}, StatefulSets: map[string]*appsv1.StatefulSet{}}
			if tc.lease != nil {
				o.Leases[n.BackupName()] = tc.lease
			}
			if tc.sts != nil {
				o.StatefulSets[n.StandbyApplier()] = tc.sts
			}
			parent := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{api.AnnPromote: tc.token}}}
			f := &facts.Facts{Now: now, Names: n, Parent: parent, Observed: o, Bootstrapped: !tc.notFormed, StandbyPromoted: tc.promoted}
			d := Standby(f, StandbyInput{HasSpec: true, Spec: spec})
			require.True(t, d.On)
			require.Equal(t, tc.wantApplier, d.Applier)
			require.Equal(t, tc.wantReplicas, d.ApplierReplicas)
			if tc.wantFence {
				require.Equal(t, standby.Fence(nil), d.Auth)
			} else {
				require.Equal(t, standby.Lift(nil), d.Auth)
			}
			require.Equal(t, tc.wantRecord, d.Record)
			require.Equal(t, tc.wantWaiting, d.Waiting != "", d.Waiting)
			require.Equal(t, tc.lagging == "", d.Lagging == "", d.Lagging)
			require.Contains(t, d.Lagging, tc.lagging)
			require.Equal(t, tc.stopped == "", d.Stopped == "", d.Stopped)
			require.Contains(t, d.Stopped, tc.stopped)
			switch {
			case tc.promoted != nil:
				require.Equal(t, tc.promoted, d.Promoted, "the recorded promotion stands, whatever the token says now")
			case tc.wantRecord:
				require.Equal(t, &api.StandbyPromoted{Token: "t1", Revision: 90, Time: metav1.Time{Time: now}, PrimaryNewestRevision: 100}, d.Promoted)
			default:
				require.Nil(t, d.Promoted)
			}
		})
	}
	require.Equal(t, StandbyPart{ApplierOff: "spec.standby is not set"}, Standby(&facts.Facts{}, StandbyInput{HasSpec: true, Spec: api.ClusterSpec{}}), "not a standby")
}

// A lag too large for a Duration (the applier's report is its word) still reads as lagging, never as a
// negative lag that would hide it.
func TestStandbyHugeReportedLagIsLagging(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	r := &api.StandbyReport{Revision: 90, Newest: 100, LagSeconds: 1e300, ReportTime: now}
	lagging, stopped := standbyConditions(now, time.Minute, r, nil)
	require.Contains(t, lagging, "behind the primary's newest revision 100")
	require.Empty(t, stopped)
}
