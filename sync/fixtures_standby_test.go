package sync

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdhook/etcdhook/api"
)

// The standby's fixtures (docs/design/21-standby.md): a new cluster with spec.standby, following its
// primary's backups, lagging, stopped, promoted, and refused specs.

const standbyFrom = "s3://dr-etcd/prod/prod/main/latest?region=eu-west-1"

// standbyOn is a standby formed from its seed's restore, its applier's report on the backup Lease.
func standbyOn(w *world, r api.StandbyReport) {
	w.spec.Standby = &api.StandbySpec{From: standbyFrom, CredentialsSecret: "dr-credentials"}
	settle(w)
	r.ReportTime, r.ClusterID, r.Chain, r.ChainStart = w.now.Add(-time.Second), "9a1f0c3e5b7d2468", "prod/main/chains/4242/", 4242
	w.backupAnn = map[string]string{api.AnnStandbyReport: r.String()}
	w.step(time.Second)
}

func standbyFollowing(w *world) {
	standbyOn(w, api.StandbyReport{Revision: 9870, Time: w.now.Add(-3 * time.Second), Newest: 9876, NewestTime: w.now.Add(-2 * time.Second), LagSeconds: 1})
}

// standbyPromoted: a promote token, and syncs until the applier is gone and the promotion recorded.
func standbyPromoted(w *world) {
	standbyFollowing(w)
	w.parentAnn = map[string]string{api.AnnPromote: "failover-1"}
	w.step(time.Second) // the applier to 0
	w.step(time.Second) // no applier pod: recorded, the fence lifted
	w.step(time.Second)
}

func standbyFixtures() []fixture {
	return []fixture{
		{name: "standby-following", build: standbyFollowing},
		{name: "standby-lagging", build: func(w *world) {
			standbyOn(w, api.StandbyReport{Revision: 9000, Time: w.now.Add(-6 * time.Minute), Newest: 9876, NewestTime: w.now.Add(-2 * time.Second), LagSeconds: 358})
		}},
		{name: "standby-stopped", build: func(w *world) {
			standbyOn(w, api.StandbyReport{Revision: 9870, Newest: 9990, LagSeconds: 40, Stop: &api.StandbyStop{
				Reason: "Gap", Object: "prod/main/chains/9950/", Revision: 9870, Message: "the chain starting at 9950 starts after the standby's revision"}})
		}},
		{name: "standby-promote-requested", build: func(w *world) {
			standbyFollowing(w)
			w.parentAnn = map[string]string{api.AnnPromote: "failover-1"}
		}},
		{name: "standby-promoted", build: standbyPromoted},
		{name: "standby-second-promote", build: func(w *world) {
			standbyPromoted(w)
			w.parentAnn = map[string]string{api.AnnPromote: "failover-2"}
		}},
		{name: "standby-invalid", build: func(w *world) {
			w.spec.Standby = &api.StandbySpec{From: standbyFrom, CredentialsSecret: "dr-credentials"}
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials"}
			w.spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}},
		{name: "standby-own-folder", build: func(w *world) {
			w.spec.Standby = &api.StandbySpec{From: "s3://dr-etcd/prod/" + w.ns + "/" + w.name + "/latest?region=eu-west-1", CredentialsSecret: "dr-credentials"}
			withBackup("", "s3://dr-etcd/prod?region=eu-west-1")(&w.spec)
		}},
	}
}
