package render

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// standbyStatus is status.standby from the standby's decision: the applier's last report, and the
// promotion; StandbyLagging and StandbyStopped as the decision says them (nil when not a standby).
func standbyStatus(d *steps.Decision, add func(string, bool, string, string)) *api.StandbyStatus {
	sb := d.Standby
	if !sb.On {
		return nil
	}
	st := &api.StandbyStatus{Promoted: sb.Promoted}
	if r := sb.Report; r != nil {
		st.Revision, st.Newest, st.ClusterID, st.Chain, st.ChainStart = r.Revision, r.Newest, r.ClusterID, r.Chain, r.ChainStart
		st.Time, st.NewestTime, st.ReportTime = timeOrNil(r.Time), timeOrNil(r.NewestTime), timeOrNil(r.ReportTime)
		st.Lag = &metav1.Duration{Duration: time.Duration(r.LagSeconds * float64(time.Second)).Round(time.Millisecond)}
		st.Message, st.Stop = r.Problem, r.Stop
	}
	if sb.Lagging != "" {
		add(api.CondStandbyLagging, true, "Lagging", sb.Lagging)
	}
	if sb.Stopped != "" {
		add(api.CondStandbyStopped, true, "Stopped", sb.Stopped)
	}
	return st
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
