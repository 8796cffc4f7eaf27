package ui

import (
	"cmp"
	"slices"
)

// The layered layout of a pipeline's graph (a small Sugiyama): each node's column is
// its longest path from a node without dependencies, an edge that spans columns passes
// through a virtual point in each column between, and the order within each column is
// improved by barycenter sweeps, keeping the order with the fewest crossings. It is
// deterministic: the same graph is always drawn the same (ties keep the spec's order).

// sweeps is how many barycenter passes (alternately down and up) the order gets; the
// crossings stop falling after a handful on graphs of the size a pipeline has (≤ 200).
const sweeps = 8

// graphNode is a node as the graph draws it.
type graphNode struct {
	Name      string
	DependsOn []string
	// Label is the second line: the job (team/job for another team's).
	Label string
	// Status colours the node ("" when there is no run).
	Status string
	// Href, when set, is where the node links to (its execution).
	Href string
}

// layered is a graph laid out: slots 0..n-1 are the nodes, the others virtual points of
// the edges; col and order place each slot.
type layered struct {
	n     int
	col   []int
	cols  [][]int // the slots of each column, in order
	preds [][]int // slots in the previous column linked to each slot
	succs [][]int
	// chains are the edges, each the slots it passes from its upstream to its downstream.
	chains [][]int
}

// layout lays nodes out; a depends_on naming no node is ignored, as is a cycle's closing
// edge (the API refuses both).
func layout(nodes []graphNode) *layered {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		idx[n.Name] = i
	}
	g := &layered{n: len(nodes), col: columns(nodes, idx)}
	g.preds, g.succs = make([][]int, len(nodes)), make([][]int, len(nodes))
	for v, n := range nodes {
		for _, d := range n.DependsOn {
			if u, ok := idx[d]; ok && g.col[u] < g.col[v] {
				g.chain(u, v)
			}
		}
	}
	g.cols = make([][]int, slices.Max(append(slices.Clone(g.col), 0))+1)
	for s, c := range g.col {
		g.cols[c] = append(g.cols[c], s)
	}
	g.order()
	return g
}

// columns is each node's longest path from a node without dependencies.
func columns(nodes []graphNode, idx map[string]int) []int {
	col := make([]int, len(nodes))
	state := make([]int8, len(nodes)) // 0 new, 1 on the path, 2 done
	var visit func(i int) int
	visit = func(i int) int {
		if state[i] != 0 {
			return col[i] // done, or a cycle's closing edge (counted as nothing)
		}
		state[i] = 1
		for _, d := range nodes[i].DependsOn {
			if j, ok := idx[d]; ok && state[j] != 1 {
				col[i] = max(col[i], visit(j)+1)
			}
		}
		state[i] = 2
		return col[i]
	}
	for i := range nodes {
		visit(i)
	}
	return col
}

// chain adds the edge u→v with a virtual point in each column between.
func (g *layered) chain(u, v int) {
	path := []int{u}
	prev := u
	for c := g.col[u] + 1; c < g.col[v]; c++ {
		s := len(g.col)
		g.col = append(g.col, c)
		g.preds, g.succs = append(g.preds, nil), append(g.succs, nil)
		g.link(prev, s)
		path, prev = append(path, s), s
	}
	g.link(prev, v)
	g.chains = append(g.chains, append(path, v))
}

func (g *layered) link(a, b int) {
	g.succs[a] = append(g.succs[a], b)
	g.preds[b] = append(g.preds[b], a)
}

// order sorts each column by the mean position of its neighbours, sweeping down then
// up, and keeps the order with the fewest crossings.
func (g *layered) order() {
	best, fewest := g.snapshot(), g.crossings()
	for i := range sweeps {
		down := i%2 == 0
		for k := range g.cols {
			c := k
			if !down {
				c = len(g.cols) - 1 - k
			}
			if down && c > 0 {
				g.sortBy(c, g.preds, g.cols[c-1])
			} else if !down && c < len(g.cols)-1 {
				g.sortBy(c, g.succs, g.cols[c+1])
			}
		}
		if n := g.crossings(); n < fewest {
			best, fewest = g.snapshot(), n
		}
	}
	g.cols = best
}

// sortBy orders column c by the mean index of each slot's neighbours in the column
// beside; a slot without neighbours there keeps its own index.
func (g *layered) sortBy(c int, nb [][]int, beside []int) {
	at := make(map[int]int, len(beside))
	for i, s := range beside {
		at[s] = i
	}
	key := make(map[int]float64, len(g.cols[c]))
	for i, s := range g.cols[c] {
		key[s] = float64(i)
		if len(nb[s]) > 0 {
			sum := 0
			for _, o := range nb[s] {
				sum += at[o]
			}
			key[s] = float64(sum) / float64(len(nb[s]))
		}
	}
	slices.SortStableFunc(g.cols[c], func(a, b int) int { return cmp.Compare(key[a], key[b]) })
}

// crossings counts the pairs of edges that cross between neighbouring columns.
func (g *layered) crossings() int {
	n := 0
	for c := 0; c+1 < len(g.cols); c++ {
		at := map[int]int{}
		for i, s := range g.cols[c+1] {
			at[s] = i
		}
		var edges [][2]int
		for i, s := range g.cols[c] {
			for _, t := range g.succs[s] {
				edges = append(edges, [2]int{i, at[t]})
			}
		}
		for i, a := range edges {
			for _, b := range edges[i+1:] {
				if (a[0]-b[0])*(a[1]-b[1]) < 0 {
					n++
				}
			}
		}
	}
	return n
}

func (g *layered) snapshot() [][]int {
	out := make([][]int, len(g.cols))
	for i, c := range g.cols {
		out[i] = slices.Clone(c)
	}
	return out
}
