import path from 'node:path';

/**
 * A full edge.yaml that uses every section (nodes, adapters of each type, pools, CLI, routes,
 * `${VAR}`s: set `EDGE_API_KEY` and `VLLM_KEY`), for tests that need a valid file. Tests only.
 */
export const DESIGN_EXAMPLE_PATH = path.join(__dirname, 'design-example.yaml');
