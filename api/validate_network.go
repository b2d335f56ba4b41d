package api

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// validateNetwork checks spec.network (after Defaulted): every clientFrom peer is one the API server
// accepts (a selector that parses, an ipBlock CIDR with exceptions inside it, not both kinds at once), and
// the metrics namespace is a namespace name.
func validateNetwork(s ClusterSpec) []Problem {
	var ps []Problem
	add := func(format string, args ...any) {
		ps = append(ps, Problem{"InvalidNetwork", fmt.Sprintf(format, args...)})
	}
	for i, peer := range s.Network.ClientFrom {
		field := fmt.Sprintf("spec.network.clientFrom[%d]", i)
		if peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil) {
			add("%s: ipBlock cannot be combined with a selector", field)
			continue
		}
		if peer.IPBlock == nil && peer.PodSelector == nil && peer.NamespaceSelector == nil {
			add("%s: set podSelector, namespaceSelector or ipBlock", field)
			continue
		}
		for name, sel := range map[string]*metav1.LabelSelector{"podSelector": peer.PodSelector, "namespaceSelector": peer.NamespaceSelector} {
			if sel == nil {
				continue
			}
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				add("%s.%s: %v", field, name, err)
			}
		}
		if b := peer.IPBlock; b != nil {
			cidr, err := netip.ParsePrefix(b.CIDR)
			if err != nil {
				add("%s.ipBlock.cidr %q is not a CIDR", field, b.CIDR)
				continue
			}
			for j, ex := range b.Except {
				e, err := netip.ParsePrefix(ex)
				if err != nil || e.Addr().Is4() != cidr.Addr().Is4() || e.Bits() <= cidr.Bits() || !cidr.Contains(e.Addr()) {
					add("%s.ipBlock.except[%d] %q must be a CIDR strictly inside %s", field, j, ex, b.CIDR)
				}
			}
		}
	}
	if errs := validation.IsDNS1123Label(s.Network.MetricsNamespace); len(errs) > 0 {
		add("spec.network.metricsNamespace %q is not a namespace name: %s", s.Network.MetricsNamespace, errs[0])
	}
	return ps
}
