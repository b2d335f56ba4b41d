package api

import (
	"fmt"
	"strings"
)

// Recovery from the freshest survivor (docs/design/19-recovery.md): when a quorum of the voters lost
// their data for good, the member with the highest revision (then raft term) among the others restarts
// as a one-member cluster on its data (etcd's --force-new-cluster); every other member's data is set
// aside first (fenced), and they rejoin as learners, one at a time.

// Quorum-loss modes (spec.recovery.quorumLoss).
const (
	// QuorumLossManual: the hook shows the plan (status.recovery) and acts on etcd.io/recover only.
	QuorumLossManual = "Manual"
	// QuorumLossFromSurvivor: the hook carries the plan out by itself once it may.
	QuorumLossFromSurvivor = "FromSurvivor"
	// QuorumLossFromBackup: restore the newest snapshot (spec.backup.restoreOnQuorumLoss).
	QuorumLossFromBackup = "FromBackup"
)

// RecoverySpec says what the hook does when a quorum of the voters lost their data.
type RecoverySpec struct {
	// QuorumLoss: Manual (default), FromSurvivor or FromBackup.
	QuorumLoss string `json:"quorumLoss,omitempty"`
}

// QuorumLossMode is the spec's mode: FromBackup also when spec.backup.restoreOnQuorumLoss says so
// (the field from before spec.recovery), Manual when unset.
func (s ClusterSpec) QuorumLossMode() string {
	if s.Recovery != nil && s.Recovery.QuorumLoss != "" {
		return s.Recovery.QuorumLoss
	}
	if s.Backup != nil && s.Backup.RestoreOnQuorumLoss {
		return QuorumLossFromBackup
	}
	return QuorumLossManual
}

// validateRecovery checks spec.recovery.
func validateRecovery(s ClusterSpec) []Problem {
	r := s.Recovery
	if r == nil {
		return nil
	}
	switch r.QuorumLoss {
	case "", QuorumLossManual, QuorumLossFromSurvivor:
	case QuorumLossFromBackup:
		if s.Backup == nil {
			return []Problem{{"InvalidRecovery", "spec.recovery.quorumLoss FromBackup needs spec.backup (the snapshot it restores)"}}
		}
		if s.Storage.EmptyDir != nil {
			return []Problem{{"InvalidRecovery", "spec.recovery.quorumLoss FromBackup needs volumes: storage.emptyDir has none to restore into"}}
		}
	default:
		return []Problem{{"InvalidRecovery", fmt.Sprintf("spec.recovery.quorumLoss %q is none of Manual, FromSurvivor, FromBackup", r.QuorumLoss)}}
	}
	if r.QuorumLoss != QuorumLossFromBackup && r.QuorumLoss != "" && s.Backup != nil && s.Backup.RestoreOnQuorumLoss {
		return []Problem{{"InvalidRecovery", fmt.Sprintf("spec.recovery.quorumLoss %s contradicts spec.backup.restoreOnQuorumLoss: set one", r.QuorumLoss)}}
	}
	return nil
}

// Recovery roles on a member Lease (AnnRecover).
const (
	// RecoverSurvivor: restart etcd on this member's data as a one-member cluster (--force-new-cluster).
	RecoverSurvivor = "survivor"
	// RecoverFence: stop etcd and set this member's data aside; it rejoins as a learner.
	RecoverFence = "fence"
)

// AnnRecover asks a member for its part of a recovery: "<token> <role> <member ID>". The member ID is
// the one the hook's plan saw in this ordinal's data: an agent acts only on data of that member, never
// on what a later start put there.
const AnnRecover = "etcd.io/recover"

// RecoverIntent is AnnRecover parsed.
type RecoverIntent struct {
	Token, Role, MemberID string
}

func (r RecoverIntent) String() string {
	if r.Token == "" {
		return ""
	}
	return r.Token + " " + r.Role + " " + r.MemberID
}

// ParseRecoverIntent reads AnnRecover; "" is none.
func ParseRecoverIntent(v string) (RecoverIntent, error) {
	if v == "" {
		return RecoverIntent{}, nil
	}
	f := strings.Fields(v)
	if len(f) != 3 || (f[1] != RecoverSurvivor && f[1] != RecoverFence) || !IsRecoveryToken(f[0]) {
		return RecoverIntent{}, fmt.Errorf("%s %q is not \"<token> survivor|fence <member ID>\"", AnnRecover, v)
	}
	if _, err := ParseID(f[2]); err != nil {
		return RecoverIntent{}, fmt.Errorf("%s %q: %v", AnnRecover, v, err)
	}
	return RecoverIntent{Token: f[0], Role: f[1], MemberID: f[2]}, nil
}

// RecoveryToken names one recovery: the survivor's member ID and the revision the plan saw, so that a
// plan shown (status.recovery.token) and a plan applied (etcd.io/recover-apply) are the same plan.
func RecoveryToken(survivorID string, revision int64) string {
	return fmt.Sprintf("%s@%d", survivorID, revision)
}

// IsRecoveryToken: RecoveryToken's shape.
func IsRecoveryToken(v string) bool {
	id, rev, ok := strings.Cut(v, "@")
	if !ok || rev == "" || strings.TrimLeft(rev, "0123456789") != "" {
		return false
	}
	_, err := ParseID(id)
	return err == nil
}

// AnnRecoverApply on the EtcdCluster applies the plan whose token it names (kubectl etcd recover
// --apply), in any quorumLoss mode; a token that is not the current plan's is refused.
const AnnRecoverApply = "etcd.io/recover-apply"

// RecoveryStatus is status.recovery: the plan for a quorum that lost its data, and how far it went.
type RecoveryStatus struct {
	// Phase: Waiting (a quorum may still come back, or members are waited for), Planned (Manual: apply
	// it with kubectl etcd recover --apply), Fencing, Forcing, Recovered.
	Phase string `json:"phase"`
	// Token identifies the plan (api.RecoveryToken).
	Token string `json:"token,omitempty"`
	// Survivor: the member restarted as a one-member cluster, with the revision and raft term it
	// reported.
	Survivor string `json:"survivor,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	RaftTerm int64  `json:"raftTerm,omitempty"`
	// Members: what each last known voter holds ("revision 1234, term 5", "no data", "not heard from").
	Members []RecoveryMember `json:"members,omitempty"`
	// Loses: what the recovery loses, as far as the reports tell.
	Loses   string `json:"loses,omitempty"`
	Message string `json:"message,omitempty"`
}

// RecoveryMember is one voter in a recovery plan.
type RecoveryMember struct {
	Name     string `json:"name"`
	MemberID string `json:"memberID,omitempty"`
	Holds    string `json:"holds"`
}

// Recovery phases.
const (
	RecoveryWaiting   = "Waiting"
	RecoveryPlanned   = "Planned"
	RecoveryFencing   = "Fencing"
	RecoveryForcing   = "Forcing"
	RecoveryRecovered = "Recovered"
)
