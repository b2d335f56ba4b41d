package api

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StandbySpec makes a new cluster a warm standby of another one (docs/design/21-standby.md): its seed
// restores the primary's newest snapshot with the primary's revisions, an applier replays every chunk
// of the primary's continuous backup after it, and it takes no writes until promoted
// (etcd.io/promote).
type StandbySpec struct {
	// From: the primary's folder followed by /latest (<destination>/<namespace>/<name>/latest), or one
	// of its snapshots' URL; the copy's destination (spec.backup.copy of the primary) reads a bucket in
	// the standby's own region.
	From              string `json:"from"`
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
	// MaxLag: StandbyLagging (and the alert EtcdStandbyLagging) when the standby is further behind the
	// newest chunk stored than this, or reports nothing for as long. Default 1m; 30s to 24h.
	MaxLag *metav1.Duration `json:"maxLag,omitempty"`
	// Encryption: the Secret whose identities open the primary's encrypted backups.
	Encryption  *EncryptionSpec `json:"encryption,omitempty"`
	StoreAccess `json:",inline"`
}

// Lag is the lag bound in force.
func (s StandbySpec) Lag() time.Duration {
	if s.MaxLag != nil {
		return s.MaxLag.Duration
	}
	return DefaultMaxLag
}

// StandbyStatus is where a standby stands: the applier's last report (standby.Progress), the stop
// that ended following, and the promotion.
type StandbyStatus struct {
	// Revision and Time: the newest revision the standby holds, and when the primary's writer received it.
	Revision int64        `json:"revision,omitempty"`
	Time     *metav1.Time `json:"time,omitempty"`
	// Newest and NewestTime: the newest revision in the primary's store; Lag the time between the two
	// (0 once the standby holds it).
	Newest     int64            `json:"newest,omitempty"`
	NewestTime *metav1.Time     `json:"newestTime,omitempty"`
	Lag        *metav1.Duration `json:"lag,omitempty"`
	// ClusterID: the primary's etcd cluster ID whose history the standby holds.
	ClusterID string `json:"clusterID,omitempty"`
	// Chain and ChainStart: the chain followed (its folder) and its snapshot's revision.
	Chain      string `json:"chain,omitempty"`
	ChainStart int64  `json:"chainStart,omitempty"`
	// ReportTime: the applier's last report; Message its last transient problem (retried).
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	Message    string       `json:"message,omitempty"`
	// Stop: following stopped for good (docs/design/21-standby.md §21.4).
	Stop *StandbyStop `json:"stop,omitempty"`
	// Promoted: the etcd.io/promote request that ended the standby.
	Promoted *StandbyPromoted `json:"promoted,omitempty"`
}

// StandbyStop: why following stopped (Missing, Foreign, Broken, Gap, Diverged), the store's object
// that stopped it, and the revision the standby holds exactly.
type StandbyStop struct {
	Reason   string `json:"reason"`
	Object   string `json:"object,omitempty"`
	Revision int64  `json:"revision"`
	Message  string `json:"message,omitempty"`
}

// StandbyPromoted: the promotion's token, the revision and time the standby ended at, and the
// primary's newest revision it had seen (what revisions after Revision may be lost).
type StandbyPromoted struct {
	Token                 string      `json:"token"`
	Revision              int64       `json:"revision"`
	Time                  metav1.Time `json:"time"`
	PrimaryNewestRevision int64       `json:"primaryNewestRevision,omitempty"`
}

// StandbyReport is what the applier reports on its Lease under AnnStandbyReport (as the continuous
// backup writer reports under AnnBackupContinuous).
type StandbyReport struct {
	Revision   int64     `json:"revision,omitempty"`
	Time       time.Time `json:"time,omitzero"`
	Newest     int64     `json:"newest,omitempty"`
	NewestTime time.Time `json:"newestTime,omitzero"`
	// LagSeconds: Progress.Lag.
	LagSeconds float64 `json:"lagSeconds,omitempty"`
	ClusterID  string  `json:"clusterID,omitempty"`
	Chain      string  `json:"chain,omitempty"`
	ChainStart int64   `json:"chainStart,omitempty"`
	// ReportTime: when this report was written.
	ReportTime time.Time `json:"reportTime"`
	// Problem: the last transient failure, retried; empty while it follows.
	Problem string `json:"problem,omitempty"`
	// Stop: following stopped for good.
	Stop *StandbyStop `json:"stop,omitempty"`
}

// ParseStandbyReport reads the applier's report; empty is no report.
func ParseStandbyReport(s string) (*StandbyReport, error) {
	return parseReport(s, func(r *StandbyReport) error {
		switch {
		case r.ReportTime.IsZero():
			return fmt.Errorf("no reportTime")
		case r.Revision < 0 || r.Newest < 0 || r.LagSeconds < 0:
			return fmt.Errorf("a negative revision or lag")
		}
		return nil
	})
}

// String renders the report for its annotation.
func (r StandbyReport) String() string {
	r.Problem = reportMessage(r.Problem)
	return reportJSON(r)
}

// ParseStandbyPromoted reads the ConfigMap's record of a promotion; empty is none.
func ParseStandbyPromoted(s string) (*StandbyPromoted, error) {
	return parseReport(s, func(r *StandbyPromoted) error {
		if r.Token == "" || r.Time.IsZero() {
			return fmt.Errorf("no token or time")
		}
		return nil
	})
}

// String renders the promotion for the ConfigMap's record.
func (p StandbyPromoted) String() string { return reportJSON(p) }
