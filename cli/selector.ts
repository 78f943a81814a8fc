/** `adv get -l`: the matcher lives in controller/selector.ts (Alerts select with it too). */
export { parseSelector, selectorMatches, type Requirement } from '../controller/index.js';
