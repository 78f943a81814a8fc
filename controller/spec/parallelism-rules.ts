/**
 * Rules of a run's `parallelism`: a mesh with one size per distinct axis, that spans the devices
 * the run asks for, and only its own axes named by the sharding hints.
 */
import type { Collector, Path } from './rule-kit.js';
import type { Parallelism, Resources } from './schema.js';
import { closest } from './validate.js';

/** Devices a run asks for: accelerators per node × nodes. */
export function devicesOf(r: Resources): number {
  const perNode = (r.gpus ?? 0) > 0 ? (r.gpus ?? 0) : (r.tpus ?? 0);
  return perNode * (r.nodes ?? 1);
}

type Mesh = Parallelism['mesh'];

/** One size per distinct mesh axis, a mesh that spans the run's devices, and only its axes named. */
export function parallelismRules(c: Collector, par: Parallelism, res: Resources, base: Path): void {
  const { axes, shape } = par.mesh;
  const meshPath = [...base, 'mesh'];
  if (axes.length !== shape.length) {
    c.error(
      'MeshShape',
      [...meshPath, 'shape'],
      `mesh has ${axes.length} axes but shape has ${shape.length} sizes`,
      'give one size per axis, in the same order',
    );
    return;
  }
  axes.forEach((a, i) => {
    if (axes.indexOf(a) !== i)
      c.error(
        'MeshAxisDuplicate',
        [...meshPath, 'axes', i],
        `axis "${a}" is named twice`,
        'give every axis its own name',
      );
  });
  meshDeviceRules(c, shape, res, meshPath);
  axisReferenceRules(c, par, devicesOf(res), base);
}

/** The product of the axis sizes that are written (a null one counts as 1). */
function knownMeshSize(shape: Mesh['shape']): number {
  return shape.reduce<number>((p, s) => p * (s ?? 1), 1);
}

/** The devices a run asks for, in words: `8 gpus × 2 nodes`. */
function devicesAsked(res: Resources): string {
  const nodes = res.nodes ?? 1;
  return (res.gpus ?? 0) > 0
    ? `${res.gpus} gpus × ${nodes} node${nodes === 1 ? '' : 's'}`
    : (res.tpus ?? 0) > 0
      ? `${res.tpus} tpus × ${nodes} node${nodes === 1 ? '' : 's'}`
      : 'no accelerators';
}

/** The mesh spans exactly the devices the run asks for; one null size may take what the others leave. */
function meshDeviceRules(c: Collector, shape: Mesh['shape'], res: Resources, meshPath: Path): void {
  const nulls = shape.filter((s) => s === null).length;
  const known = knownMeshSize(shape);
  const devices = devicesOf(res);
  const asked = devicesAsked(res);
  if (nulls > 1) {
    c.error('MeshShape', [...meshPath, 'shape'], 'more than one axis size is null', 'set all sizes but one');
  } else if (devices === 0) {
    c.error(
      'MeshDevices',
      meshPath,
      'a mesh is declared but the run asks for no devices',
      'set resources.gpus (or resources.tpus) so the mesh has devices to span',
    );
  } else if (nulls === 1 && devices % known !== 0) {
    c.error(
      'MeshDevices',
      [...meshPath, 'shape'],
      `the known axis sizes multiply to ${known}, which does not divide the ${devices} devices the run asks for (${asked})`,
      `choose sizes whose product divides ${devices}`,
    );
  } else if (nulls === 0 && known !== devices) {
    c.error(
      'MeshDevices',
      [...meshPath, 'shape'],
      `mesh shape [${shape.join(', ')}] spans ${known} devices but the run asks for ${devices} (${asked})`,
      `make the product of the shape ${devices}, or write null for one axis to take the rest`,
    );
  }
}

/** An axis's size: as written, or for the null one, the devices the others leave; null when unknown. */
function axisSize(mesh: Mesh, devices: number, axis: string): number | null {
  const i = mesh.axes.indexOf(axis);
  if (i < 0) return null;
  const known = knownMeshSize(mesh.shape);
  const s = mesh.shape[i];
  return s ?? (known > 0 ? devices / known : null);
}

/** Whether the mesh has `axis`; reports the name (with the closest axis) when it does not. */
function meshHasAxis(c: Collector, axes: readonly string[], axis: string, path: Path, what: string): boolean {
  if (axes.includes(axis)) return true;
  const guess = closest(axis, axes);
  c.error(
    'UnknownAxis',
    path,
    `${what} names axis "${axis}", which the mesh does not have (axes: ${axes.join(', ')})`,
    guess ? `did you mean "${guess}"?` : 'add the axis to mesh.axes or name an existing one',
  );
  return false;
}

/** dp, tp (and its sharding rules) and pp name axes of the mesh; pp's stages match its axis's size. */
function axisReferenceRules(c: Collector, par: Parallelism, devices: number, base: Path): void {
  const axes = par.mesh.axes;
  if (par.dp) meshHasAxis(c, axes, par.dp.axis, [...base, 'dp', 'axis'], 'dp');
  if (par.tp) {
    meshHasAxis(c, axes, par.tp.axis, [...base, 'tp', 'axis'], 'tp');
    (par.tp.rules ?? []).forEach((rule, i) =>
      rule.spec.forEach((a, j) => {
        if (a !== null)
          meshHasAxis(c, axes, a, [...base, 'tp', 'rules', i, 'spec', j], `tp rule "${rule.param}"`);
      }),
    );
  }
  if (par.pp && meshHasAxis(c, axes, par.pp.axis, [...base, 'pp', 'axis'], 'pp')) {
    const s = axisSize(par.mesh, devices, par.pp.axis);
    if (s !== null && Number.isInteger(s) && s !== par.pp.stages) {
      c.error(
        'PipelineStages',
        [...base, 'pp', 'stages'],
        `pp has ${par.pp.stages} stages but axis "${par.pp.axis}" has size ${s}`,
        `set stages to ${s}, or change the mesh`,
      );
    }
  }
}
