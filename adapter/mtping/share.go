/*
Copyright 2026 The Knative Authors

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package mtping

import (
	"cmp"
	"slices"
)

// shareView is what one replica knows of the buckets' holders: the
// replicas alive (the adapter's member slots, itself included) and how
// many buckets each valid holder leads.
type shareView struct {
	buckets int
	members []string       // live replicas, this one included
	held    map[string]int // buckets led, by holder; holders may be non-members
	free    int            // buckets no one leads (no holder, or its Lease expired)
}

// sharePlan is one replica's part of an even split: how many buckets it
// may lead (it stands for free ones while below target) and how many it
// gives up now.
type sharePlan struct {
	target  int
	release int
}

// plan splits the buckets evenly over the members: every member leads
// between ⌊B/R⌋ and ⌈B/R⌉. A replica above ⌈B/R⌉ gives up the excess. A
// member below ⌊B/R⌋ that the free buckets cannot fill is filled by the
// members above ⌊B/R⌋, one bucket each, the fullest first (ties by name),
// so that every replica reading the same view picks the same donors.
// While a member other than me is below ⌊B/R⌋, free buckets are left to
// it: my target is ⌊B/R⌋, not ⌈B/R⌉.
func (v shareView) plan(me string, mine int) sharePlan {
	r := max(len(v.members), 1)
	floor, ceil := v.buckets/r, (v.buckets+r-1)/r
	if mine > ceil {
		return sharePlan{target: ceil, release: mine - ceil}
	}
	holding := func(m string) int {
		if m == me {
			return mine
		}
		return v.held[m]
	}
	target, deficit := ceil, 0
	for _, m := range v.members {
		if h := holding(m); h < floor {
			deficit += floor - h
			if m != me {
				target = floor
			}
		}
	}
	p := sharePlan{target: target}
	need := deficit - v.free
	if need <= 0 || mine <= floor {
		return p
	}
	var donors []string
	for _, m := range v.members {
		if holding(m) > floor {
			donors = append(donors, m)
		}
	}
	slices.SortFunc(donors, func(a, b string) int {
		return cmp.Or(cmp.Compare(holding(b), holding(a)), cmp.Compare(a, b))
	})
	if i := slices.Index(donors, me); i >= 0 && i < need {
		p.release = 1
	}
	return p
}
