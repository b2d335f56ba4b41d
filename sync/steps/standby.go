package steps

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/standby"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// A warm standby (docs/design/21-standby.md). While spec.standby holds and no promotion is recorded,
// the applier runs (one replica) and the auth declared is the write fence, standby.Fence(spec.auth).
// An etcd.io/promote token stops the applier (zero replicas) and, once no applier pod is left, records
// the promotion (ConfigKeyStandbyPromoted: the revision and time reached, the primary's newest
// revision seen) and declares standby.Lift(spec.auth). After that the applier is not rendered, and
// any later token changes nothing.

// StandbyInput is what Standby reads of the decisions before it: the spec adopted.
type StandbyInput struct {
	HasSpec bool
	Spec    api.ClusterSpec
}

// StandbyPart is the standby's part of the decision; the zero value is a cluster that is no standby.
type StandbyPart struct {
	// On: spec.standby is set (following, promoting or promoted).
	On bool
	// Applier: render the applier StatefulSet, with ApplierReplicas (1 following, 0 while a promotion
	// stops it).
	Applier         bool
	ApplierReplicas int32
	// Auth: the auth declaration in force (Fence while a standby, Lift once promoted), nil when not a
	// standby (spec.auth as it is).
	Auth *api.AuthSpec
	// Report: the applier's last report (the backup Lease), nil without one.
	Report *api.StandbyReport
	// Promoted: the promotion, recorded or recorded by this answer (Record).
	Promoted *api.StandbyPromoted
	Record   bool
	// Waiting: what a promotion waits for ("" none).
	Waiting string
	// Lagging and Stopped: the messages of StandbyLagging and StandbyStopped ("" false).
	Lagging, Stopped string
	// Distrusted: reports ignored, for InputIgnored.
	Distrusted []string
	// ApplierOff: why the applier StatefulSet is not rendered ("" while it is), the reason Metacontroller
	// is let delete one that runs.
	ApplierOff string
}

// Standby decides the standby's step from the facts: its applier, its auth declaration, its
// promotion and its conditions.
func Standby(f *facts.Facts, in StandbyInput) StandbyPart {
	d := standbyStep(f, in)
	d.ApplierOff = applierOff(f, d)
	return d
}

// applierOff says why the applier StatefulSet is let go ("" when it is rendered).
func applierOff(f *facts.Facts, d StandbyPart) string {
	switch {
	case !d.On:
		return "spec.standby is not set"
	case !d.Applier:
		return "the standby is promoted"
	case !f.Bootstrapped:
		return "the standby's seed has not restored yet"
	}
	return ""
}

// PromotedRecord is the promotion to record (ConfigKeyStandbyPromoted), "" before one; the one recorded
// is rendered again from what was read.
func (d StandbyPart) PromotedRecord() string {
	if d.Promoted == nil {
		return ""
	}
	return d.Promoted.String()
}

// standbyStep is Standby but for the reasons derived from its result.
func standbyStep(f *facts.Facts, in StandbyInput) StandbyPart {
	if !in.HasSpec || in.Spec.Standby == nil {
		return StandbyPart{}
	}
	sb := in.Spec.Standby
	d := StandbyPart{On: true}
	d.Report, d.Distrusted = standbyReport(f)
	if d.Promoted = f.StandbyPromoted; d.Promoted != nil {
		d.Auth = standby.Lift(in.Spec.Auth)
		return d
	}
	d.Auth, d.Applier, d.ApplierReplicas = standby.Fence(in.Spec.Auth), true, 1
	token := strings.TrimSpace(f.Parent.Annotations[api.AnnPromote])
	if token == "" {
		if f.Bootstrapped {
			d.Lagging, d.Stopped = standbyConditions(f.Now, sb.Lag(), d.Report, f.Observed.StatefulSets[f.Names.StandbyApplier()])
		}
		return d
	}
	// Promoting: the applier goes first, so that nothing is applied after the revision recorded.
	d.ApplierReplicas = 0
	if !f.Bootstrapped {
		d.Waiting = fmt.Sprintf("the standby's seed to restore the primary's snapshot before the promotion %q", token)
		return d
	}
	if why := applierRunning(f.Observed.StatefulSets[f.Names.StandbyApplier()]); why != "" {
		d.Waiting = fmt.Sprintf("the applier StatefulSet %s to stop before the promotion %q: %s", f.Names.StandbyApplier(), token, why)
		return d
	}
	// No applier pod is left: the promotion is recorded, and the applier released in the same answer.
	d.Applier = false
	d.Promoted, d.Record = &api.StandbyPromoted{Token: token, Time: metav1.Time{Time: f.Now.UTC()}}, true
	if r := d.Report; r != nil {
		d.Promoted.Revision, d.Promoted.PrimaryNewestRevision = r.Revision, r.Newest
		if r.Stop != nil {
			d.Promoted.Revision = r.Stop.Revision
		}
	}
	d.Auth = standby.Lift(in.Spec.Auth)
	return d
}

// applierRunning says why the applier may still run a pod ("" when none can): its StatefulSet asks for
// replicas, or its controller has not yet seen the zero, or still counts a pod (a terminating one
// included). No StatefulSet: no applier.
func applierRunning(s *appsv1.StatefulSet) string {
	switch {
	case s == nil:
		return ""
	case s.Spec.Replicas == nil || *s.Spec.Replicas != 0:
		return "scaling it to 0"
	case s.Status.ObservedGeneration < s.Generation:
		return "its controller has not seen the scale to 0 yet"
	case s.Status.Replicas != 0:
		return fmt.Sprintf("%d pod(s) still there", s.Status.Replicas)
	}
	return ""
}

// standbyReport reads the applier's report on the backup Lease.
func standbyReport(f *facts.Facts) (*api.StandbyReport, []string) {
	l := f.Observed.Leases[f.Names.BackupName()]
	if l == nil {
		return nil, nil
	}
	r, note := facts.LeaseReport(f.Now, l, api.AnnStandbyReport, api.ParseStandbyReport,
		func(*api.StandbyReport) bool { return true }, func(r *api.StandbyReport) time.Time { return r.ReportTime })
	if note != "" {
		return r, []string{note}
	}
	return r, nil
}

// standbyConditions are StandbyLagging's and StandbyStopped's messages: lagging past maxLag, or
// silent as long (an applier that does not report may not be applying either; a new one is given
// maxLag from its StatefulSet's creation); stopped for good, naming the object.
func standbyConditions(now time.Time, maxLag time.Duration, r *api.StandbyReport, applier *appsv1.StatefulSet) (lagging, stopped string) {
	switch {
	case r == nil && (applier == nil || applier.CreationTimestamp.IsZero() || now.Sub(applier.CreationTimestamp.Time) <= maxLag):
		return "", ""
	case r == nil:
		return fmt.Sprintf("the standby applier (StatefulSet %s) has not reported within spec.standby.maxLag %s of its creation", applier.Name, maxLag), ""
	case r.Stop != nil:
		return "", fmt.Sprintf("following stopped at revision %d: %s: %s (%s); the standby holds the primary's keyspace at that revision, and may still be promoted", r.Stop.Revision, r.Stop.Reason, r.Stop.Object, r.Stop.Message)
	case now.Sub(r.ReportTime) > maxLag:
		return fmt.Sprintf("the standby applier last reported %s ago (maxLag %s)", now.Sub(r.ReportTime).Round(time.Second), maxLag), ""
	case reportedLag(r) > maxLag:
		return fmt.Sprintf("the standby is %s behind the primary's newest revision %d in the store (at %d; maxLag %s)", reportedLag(r).Round(time.Second), r.Newest, r.Revision, maxLag), ""
	}
	return "", ""
}

// AuthSpec is spec with the auth declaration in force: the standby's fence or lift, else spec.auth.
func (d StandbyPart) AuthSpec(spec api.ClusterSpec) api.ClusterSpec {
	if d.Auth != nil {
		spec.Auth = d.Auth
	}
	return spec
}

// maxReportedLag bounds the lag an applier's report may state: the report is its word, and seconds too
// many for a Duration would convert to a negative one and read as no lag at all.
const maxReportedLag = 1e9 // seconds, about 31 years

// reportedLag is the report's lag as a Duration, bounded by maxReportedLag.
func reportedLag(r *api.StandbyReport) time.Duration {
	return time.Duration(min(r.LagSeconds, maxReportedLag) * float64(time.Second))
}
