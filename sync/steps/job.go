package steps

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// JobKind is what a Job the decision asks for does.
type JobKind int

const (
	// JobCarried re-emits an observed Job (Jobs are OnDelete children: the object only keeps it alive).
	JobCarried JobKind = iota
	// JobRemove removes a member from etcd's member list.
	JobRemove
	// JobDeleteVolume deletes the claim of a removed member's ordinal.
	JobDeleteVolume
	// JobGrowVolume grows one member's claim.
	JobGrowVolume
	// JobClaimTemplate deletes the StatefulSet with its pods orphaned, for its claim template.
	JobClaimTemplate
	// JobRestoreVerify checks an in-place restore's snapshot while the cluster serves.
	JobRestoreVerify
	// JobRestore restores the verified snapshot into ordinal 0's volume.
	JobRestore
)

// Job is one Job as the decision asks for it; the fields its kind does not use are zero.
type Job struct {
	Kind    JobKind
	Attempt int
	// Ordinal: the member whose volume the Job deletes or grows.
	Ordinal int
	// MemberID, PeerURL and Reason: the member a remove Job removes, and why.
	MemberID, PeerURL, Reason string
	// Endpoints: the voters' client URLs the Job talks to (comma-separated).
	Endpoints string
	// Size: the claim size a grow or template Job brings the claims to; StatefulSetUID the one the
	// template Job deletes.
	Size           resource.Quantity
	StatefulSetUID string
	// Restore: the in-place restore a restore or verify Job carries out.
	Restore *RestoreJob
	// Carried: the observed Job a carried one re-emits.
	Carried *batchv1.Job
}

// RestoreJob is an in-place restore as its Jobs need it.
type RestoreJob struct {
	// Request is the source (an etcd.io/restore-from value, or <destination>/latest); Key names the
	// restore from its start to its end.
	Request, Key string
	// SHA256 is the verified snapshot's hash ("" before verification); AcceptCluster the foreign
	// cluster UID the user accepted.
	SHA256, AcceptCluster string
	// OnQuorumLoss: started by restoreOnQuorumLoss, not by a request.
	OnQuorumLoss bool
	// Point is where the restored keyspace ends (the zero point: the source as it is).
	Point backup.Point
}

// Name is the Job's name.
func (j Job) Name(n api.Names) string {
	switch j.Kind {
	case JobRemove:
		return n.RemoveJob(j.MemberID, j.Attempt)
	case JobDeleteVolume:
		return n.DeleteVolumeJob(j.Ordinal, j.Attempt)
	case JobGrowVolume:
		return n.GrowJob(j.Ordinal, j.Attempt)
	case JobClaimTemplate:
		return n.TemplateJob(j.Attempt)
	case JobRestoreVerify:
		return n.RestoreVerifyJob(j.Restore.Key)
	case JobRestore:
		return n.RestoreJob(j.Restore.Key)
	}
	return j.Carried.Name
}
