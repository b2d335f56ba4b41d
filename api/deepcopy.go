package api

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

// DeepCopy copies a spec; written by hand because the type is small and a generator would be a build step.
func (s *ClusterSpec) DeepCopy() *ClusterSpec {
	out := *s
	if s.Size != nil {
		out.Size = ptr.To(*s.Size)
	}
	out.Storage = StorageSpec{}
	if s.Storage.StorageClassName != nil {
		out.Storage.StorageClassName = ptr.To(*s.Storage.StorageClassName)
	}
	if s.Storage.Size != nil {
		q := s.Storage.Size.DeepCopy()
		out.Storage.Size = &q
	}
	if s.Storage.EmptyDir != nil {
		out.Storage.EmptyDir = s.Storage.EmptyDir.DeepCopy()
	}
	if s.Resources != nil {
		out.Resources = s.Resources.DeepCopy()
	}
	sc := s.Scheduling
	out.Scheduling = SchedulingSpec{PriorityClassName: sc.PriorityClassName}
	if sc.Affinity != nil {
		out.Scheduling.Affinity = sc.Affinity.DeepCopy()
	}
	for i := range sc.Tolerations {
		out.Scheduling.Tolerations = append(out.Scheduling.Tolerations, *sc.Tolerations[i].DeepCopy())
	}
	if sc.NodeSelector != nil {
		out.Scheduling.NodeSelector = map[string]string{}
		for k, v := range sc.NodeSelector {
			out.Scheduling.NodeSelector[k] = v
		}
	}
	for i := range sc.TopologySpreadConstraints {
		out.Scheduling.TopologySpreadConstraints = append(out.Scheduling.TopologySpreadConstraints, *sc.TopologySpreadConstraints[i].DeepCopy())
	}
	if s.Options != nil {
		out.Options = map[string]string{}
		for k, v := range s.Options {
			out.Options[k] = v
		}
	}
	t := s.Timeouts
	out.Timeouts = TimeoutsSpec{}
	if t.LearnerPromotionSeconds != nil {
		out.Timeouts.LearnerPromotionSeconds = ptr.To(*t.LearnerPromotionSeconds)
	}
	if t.DeadMemberSeconds != nil {
		out.Timeouts.DeadMemberSeconds = ptr.To(*t.DeadMemberSeconds)
	}
	if t.LeaveSeconds != nil {
		out.Timeouts.LeaveSeconds = ptr.To(*t.LeaveSeconds)
	}
	tls := s.Security.TLS
	out.Security.TLS = TLSSpec{Peer: tls.Peer, Client: ClientTLSSpec{SecretName: tls.Client.SecretName}}
	if tls.Enabled != nil {
		out.Security.TLS.Enabled = ptr.To(*tls.Enabled)
	}
	if tls.Client.Auth != nil {
		out.Security.TLS.Client.Auth = ptr.To(*tls.Client.Auth)
	}
	if tls.BuiltIn.CADuration != nil {
		out.Security.TLS.BuiltIn.CADuration = ptr.To(*tls.BuiltIn.CADuration)
	}
	if tls.BuiltIn.CertDuration != nil {
		out.Security.TLS.BuiltIn.CertDuration = ptr.To(*tls.BuiltIn.CertDuration)
	}
	if tls.BuiltIn.RotationGrace != nil {
		out.Security.TLS.BuiltIn.RotationGrace = ptr.To(*tls.BuiltIn.RotationGrace)
	}
	if s.Network.Policy != nil {
		out.Network.Policy = ptr.To(*s.Network.Policy)
	}
	if s.Network.ClientFrom != nil {
		out.Network.ClientFrom = make([]networkingv1.NetworkPolicyPeer, len(s.Network.ClientFrom))
		for i := range s.Network.ClientFrom {
			s.Network.ClientFrom[i].DeepCopyInto(&out.Network.ClientFrom[i])
		}
	}
	if d := s.Maintenance.Defrag; d != nil {
		c := *d
		if d.MinFreePercent != nil {
			c.MinFreePercent = ptr.To(*d.MinFreePercent)
		}
		out.Maintenance.Defrag = &c
	}
	if r := s.Recovery; r != nil {
		c := *r
		out.Recovery = &c
	}
	if a := s.Auth; a != nil {
		c := AuthSpec{Enabled: a.Enabled}
		for _, r := range a.Roles {
			c.Roles = append(c.Roles, AuthRole{Name: r.Name, Permissions: slices.Clone(r.Permissions)})
		}
		for _, u := range a.Users {
			u.Roles = slices.Clone(u.Roles)
			c.Users = append(c.Users, u)
		}
		out.Auth = &c
	}
	if sp := s.Maintenance.Space; sp != nil {
		c := *sp
		if sp.ActAtPercent != nil {
			c.ActAtPercent = ptr.To(*sp.ActAtPercent)
		}
		if sp.MaxQuota != nil {
			c.MaxQuota = ptr.To(sp.MaxQuota.DeepCopy())
		}
		if sp.MaxStorage != nil {
			c.MaxStorage = ptr.To(sp.MaxStorage.DeepCopy())
		}
		out.Maintenance.Space = &c
	}
	if b := s.Backup; b != nil {
		c := *b
		c.Retention = b.Retention.deepCopy()
		if k := b.Continuous; k != nil {
			kc := *k
			if k.ChunkInterval != nil {
				kc.ChunkInterval = ptr.To(*k.ChunkInterval)
			}
			if k.MaxLag != nil {
				kc.MaxLag = ptr.To(*k.MaxLag)
			}
			c.Continuous = &kc
		}
		if e := b.Encryption; e != nil {
			ec := *e
			c.Encryption = &ec
		}
		if cp := b.Copy; cp != nil {
			cc := *cp
			if r := cp.Retention; r != nil {
				rc := r.deepCopy()
				cc.Retention = &rc
			}
			c.Copy = &cc
		}
		out.Backup = &c
	}
	if r := s.Restore; r != nil {
		c := *r
		if r.ToRevision != nil {
			c.ToRevision = ptr.To(*r.ToRevision)
		}
		if r.ToTime != nil {
			c.ToTime = r.ToTime.DeepCopy()
		}
		if e := r.Encryption; e != nil {
			ec := *e
			c.Encryption = &ec
		}
		out.Restore = &c
	}
	if sb := s.Standby; sb != nil {
		c := *sb
		if sb.MaxLag != nil {
			c.MaxLag = ptr.To(*sb.MaxLag)
		}
		if e := sb.Encryption; e != nil {
			ec := *e
			c.Encryption = &ec
		}
		out.Standby = &c
	}
	return &out
}

// deepCopy is r with its own pointers.
func (r BackupRetention) deepCopy() BackupRetention {
	c := r
	if r.KeepLast != nil {
		c.KeepLast = ptr.To(*r.KeepLast)
	}
	if r.MaxAge != nil {
		c.MaxAge = ptr.To(*r.MaxAge)
	}
	for _, f := range []struct{ in, out **int32 }{
		{&r.KeepHourly, &c.KeepHourly}, {&r.KeepDaily, &c.KeepDaily},
		{&r.KeepWeekly, &c.KeepWeekly}, {&r.KeepMonthly, &c.KeepMonthly},
	} {
		if *f.in != nil {
			*f.out = ptr.To(**f.in)
		}
	}
	return c
}
