/**
 * The one way a value reaches a shell, for the controller: the runtime's quoting (adv exec's setup
 * session quotes with the same function).
 */
export { shellJoin, shellQuote } from '../../runtime/shell.js';
