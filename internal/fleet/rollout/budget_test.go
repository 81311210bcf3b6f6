package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

// TestUnavailableBudget: what moving each member of a partition costs, asked in order as the
// planner asks (never of a held or blocked member).
func TestUnavailableBudget(t *testing.T) {
	t.Parallel()
	type member struct {
		exists bool
		health memberHealth
	}
	var (
		ready    = member{exists: true, health: memberHealth{ready: true}}
		notReady = member{exists: true}
		absent   = member{}
		held     = member{exists: true, health: memberHealth{held: true}}
		blocked  = member{exists: true, health: memberHealth{blocked: true}}
	)
	two, half := intstr.FromInt32(2), intstr.FromString("50%")
	tests := []struct {
		name           string
		maxUnavailable *intstr.IntOrString
		members        []member
		// ask are the members asked about, in order.
		ask  []int
		want []bool
	}{
		{"one at a time when unset", nil, []member{ready, ready, ready}, []int{0, 1, 2}, []bool{true, false, false}},
		{"a count", &two, []member{ready, ready, ready, ready}, []int{0, 1, 2, 3}, []bool{true, true, false, false}},
		{"a percentage of the partition, rounded down", &half, []member{ready, ready, ready, ready, ready}, []int{0, 1, 2, 3, 4}, []bool{true, true, false, false, false}},
		{"a member not Ready moves at no cost, and takes its share from the start", &two, []member{ready, notReady, ready}, []int{0, 1, 2}, []bool{true, true, false}},
		{"creating a member costs one", nil, []member{absent, ready}, []int{0, 1}, []bool{true, false}},
		{"members not Ready beyond the budget still move; no Ready one does", nil, []member{notReady, notReady, ready}, []int{0, 1, 2}, []bool{true, true, false}},
		{"held and blocked members are not counted", nil, []member{held, blocked, ready}, []int{2}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms := make([]*Member, len(tt.members))
			health := make([]memberHealth, len(tt.members))
			for i, m := range tt.members {
				ms[i] = &Member{}
				if m.exists {
					ms[i].Pkg = &v1alpha1.Package{}
				}
				health[i] = m.health
			}
			budget := newUnavailableBudget(tt.maxUnavailable, ms, health)
			var got []bool
			for _, i := range tt.ask {
				got = append(got, budget.allow(ms[i], health[i]))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
