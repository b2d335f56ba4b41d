package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/steps"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// decideInPlace carries out the in-place restore the record holds (steps.InPlace). It returns true
// while one runs: the plan is then the restore's alone. p.InPlace is the record to write back.
func (p *plan) decideInPlace() bool {
	d := steps.InPlace(p.f)
	p.InPlace, p.InPlaceFailure = d.Record, d.Failure
	p.jobs = append(p.jobs, d.Jobs...)
	p.Distrusted = append(p.Distrusted, d.Distrusted...)
	if d.Restoring {
		p.Restoring = true
		p.partition = 0
		for _, lp := range p.leases {
			lp.Join = api.JoinWindow{}
		}
	}
	if d.Replicas >= 0 {
		p.Replicas = d.Replicas
	}
	if d.Pod0 {
		p.leases.SetIntent(0, api.IntentMember, p.f.Now)
	}
	p.await(d.Waiting...)
	return d.Running
}

// releaseRestoreJobs lets Metacontroller delete the restore Jobs this answer does not render
// (steps.ReleaseRestoreJobs).
func (p *plan) releaseRestoreJobs() {
	for _, r := range steps.ReleaseRestoreJobs(p.f, p.jobs) {
		p.release(r.Key, r.Name, r.Reason)
	}
}

// inPlaceRecordJSON is the record as the ConfigMap holds it, "" without one.
func (p *plan) inPlaceRecordJSON() string {
	if p.InPlace == nil {
		return ""
	}
	b, _ := wire.Marshal(p.InPlace) // plain struct: cannot fail
	return string(b)
}
